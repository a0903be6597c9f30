"""torch.distributed on the native `neuron` device: all_reduce of 1 MiB and 64 MiB float32 between
two torchrun ranks on `neuron` (the package's backend, through the plugin's multi-process job)
against gloo on CPU tensors in the same processes. (A DDP step against a single-process step is
not measured yet.)

    torchrun --nproc_per_node=2 benchmarks/bench_native_distributed.py

Rank 0 prints one JSON line: median seconds of each, and the ratios.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import torch
import torch.distributed as dist

ROUNDS = 5


def median_seconds(fn, repeat: int = ROUNDS) -> float:
    fn()  # compiles the program once
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    dist.init_process_group()
    device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
    report = {}
    for mib in (1, 64):
        n = mib * (1 << 20) // 4
        on_neuron = torch.ones(n, device=device)
        on_cpu = torch.ones(n)

        def neuron_step():
            dist.all_reduce(on_neuron)
            torch.neuron.synchronize()

        report[f"all_reduce_{mib}MiB"] = {"neuron_s": median_seconds(neuron_step),
                                         "gloo_cpu_s": median_seconds(lambda: dist.all_reduce(on_cpu))}
        report[f"all_reduce_{mib}MiB"]["neuron_over_gloo"] = (report[f"all_reduce_{mib}MiB"]["neuron_s"]
                                                             / report[f"all_reduce_{mib}MiB"]["gloo_cpu_s"])
    if dist.get_rank() == 0:
        print(json.dumps(report), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
