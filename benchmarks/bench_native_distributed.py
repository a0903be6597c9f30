"""torch.distributed on the native `neuron` device, two torchrun ranks:

- all_reduce of 1 MiB and 64 MiB float32 on `neuron` (the package's backend, through the plugin's
  multi-process job) against gloo on CPU tensors in the same processes;
- scaling: a DistributedDataParallel training step (each rank its own batch of BATCH) against the
  same step of one process alone (rank 0, while rank 1 waits), on `neuron` and on the CPU with
  gloo. `ddp_throughput_scaling` is 2 x single / ddp: the job's samples per second over one
  process's (2.0 would be perfect on two cores; this host's two CPU cores also run the simulator).

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
BATCH = 256


def median_seconds(fn, repeat: int = ROUNDS) -> float:
    fn()  # compiles the program once
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def training_step(model, optimizer, x, y):
    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        if x.device.type == "neuron":
            torch.neuron.synchronize()
    return step


def mlp(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                               torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(device)


def scaling(device) -> dict:
    """One process's step alone (rank 0; rank 1 waits at a barrier), then the DDP step of both."""
    x, y = torch.randn(BATCH, 512).to(device), torch.randint(0, 10, (BATCH,)).to(device)
    single = None
    if dist.get_rank() == 0:
        model = mlp(device)
        single = median_seconds(training_step(model, torch.optim.SGD(model.parameters(), lr=0.01), x, y))
    dist.barrier(device_ids=None) if device.type == "cpu" else dist.barrier()
    ddp = torch.nn.parallel.DistributedDataParallel(mlp(device))
    both = median_seconds(training_step(ddp, torch.optim.SGD(ddp.parameters(), lr=0.01), x, y))
    if single is None:
        return {}
    return {"single_process_step_s": single, "ddp_step_s": both, "ddp_throughput_scaling": 2 * single / both}


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
    for name, step_device in (("neuron", device), ("cpu_gloo", torch.device("cpu"))):
        report[f"ddp_step_{name}"] = scaling(step_device)
    if dist.get_rank() == 0:
        print(json.dumps(report), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
