"""Data-parallel step time on 1 and 2 processes: examples/train_digits_ddp.py.

Runs the example with the same global batch
- on simulated NeuronCores in one process (PJRT_DEVICE=NEURON),
- on simulated NeuronCores in two processes (torchrun --nproc_per_node=2, one core each,
  gradients all-reduced through the instance daemon),
- on the stock CPU backend in one process (PJRT_DEVICE=CPU), the reference.

Prints the steady-state time per training step (epochs after the first, which compiles), the
scaling ratio (1-process step time / 2-process step time) and each NEURON figure as a ratio to
the CPU backend's.

Reading the scaling ratio: simulated cores compute on the host's CPUs, and XLA's CPU code already
spreads one process's matmuls over all of them. On a host with as many CPUs as simulated cores
in use (2 here), two processes have no more arithmetic to offer than one, so the best possible
ratio is about 1.0 and what falls short of it is the cost of multi-process mode (the daemon
round trips, gang scheduling, two framework processes tracing on the same CPUs). On Trainium
each process has its own core and the ratio approaches 2.0 for compute-bound steps.

It also times host <-> device round trips of large arrays (JAX, benchmarks/transfer_worker.py)
on one NEURON process, on one of two NEURON processes that transfer at the same time (through
the instance daemon's shared memory) and on the CPU backend, as ratios to the CPU backend's;
and the per-call cost of small calls (a jitted 8-element add, a 4 KiB upload and download)
in one process against through the daemon (--transfers-only skips the training runs).

Benchmarks report; they never assert times.
Run: python benchmarks/bench_distributed.py [--epochs N] [--batch-size B] [--repeats R] [--transfer-mib 16,64]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "train_digits_ddp.py"
TRANSFER_WORKER = REPO / "benchmarks" / "transfer_worker.py"
_SCRUBBED = ("PJRT_DEVICE", "CPU_NUM_DEVICES", "JAX_PLATFORMS", "PJRT_NEURON_INSTANCE_TYPE", "NEURON_RT_VISIBLE_CORES",
             "NEURON_RT_NUM_CORES", "NEURON_PJRT_PROCESS_INDEX", "NEURON_PJRT_WORLD_SIZE",
             "NEURON_PJRT_PROCESSES_NUM_DEVICES", "NEURONCORE_NUM_DEVICES", "MASTER_ADDR", "MASTER_PORT")


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def clean_env(**settings) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PJRT_NEURON_LOCK_DIR=tempfile.mkdtemp(prefix="pjrt-neuron-bench-locks-"),
               **settings)
    return env


def run(launcher: list[str], device: str, args) -> float:
    env = clean_env(PJRT_DEVICE=device, MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port())
    argv = [*launcher, str(EXAMPLE), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
            "--hidden", str(args.hidden)]
    p = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=1800)
    report = None
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith("{"):
            report = json.loads(line)
            break
    # Exit 1 with a report is a short run below the example's accuracy bar: still timed. Ranks
    # that disagree are not.
    if (report is None or report.get("seconds_per_step") is None or p.returncode not in (0, 1)
            or len(set(report["weight_sha256_per_rank"])) != 1):
        sys.exit(f"{' '.join(argv)} failed (exit {p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return report["seconds_per_step"]


def transfer_times(platform: str, processes: int, mib: str) -> dict:
    """Process 0's report: median round-trip milliseconds by size, and per-call microseconds."""
    env = clean_env(JAX_PLATFORMS=platform)
    coordinator = f"127.0.0.1:{free_port()}"
    workers = [subprocess.Popen([sys.executable, str(TRANSFER_WORKER), "--process-id", str(i), "--num-processes",
                                 str(processes), "--coordinator", coordinator, "--mib", mib],
                                env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for i in range(processes)]
    outputs = [w.communicate(timeout=600) for w in workers]
    if any(w.returncode != 0 for w in workers):
        sys.exit(f"transfer workers on {platform} failed:\n" + "\n".join(err[-3000:] for _, err in outputs))
    return json.loads(outputs[0][0].strip().splitlines()[-1])


def print_transfers(mib: str):
    cpu = transfer_times("cpu", 1, mib)
    reports = {"NEURON, 1 process": transfer_times("neuron", 1, mib),
               "NEURON, 2 processes": transfer_times("neuron", 2, mib)}
    rows = {name: report["milliseconds"] for name, report in reports.items()}
    print("host -> device -> host round trip (JAX), median ms and ratio to the CPU backend:")
    for size, reference in cpu["milliseconds"].items():
        cells = ", ".join(f"{name} {times[size]:.2f} ms ({times[size] / reference:.2f})" for name, times in rows.items())
        print(f"  {size:>4s} MiB: CPU backend {reference:.2f} ms; {cells}", flush=True)
    # In-process against through the instance daemon (2 processes): what each small call costs.
    print("small calls (JAX), median us per call; ratio = 2 processes (through the daemon) / 1 process:")
    one, two = reports["NEURON, 1 process"]["per_call_us"], reports["NEURON, 2 processes"]["per_call_us"]
    for name, reference in cpu["per_call_us"].items():
        print(f"  {name:15s} CPU backend {reference:8.1f} us; NEURON 1 process {one[name]:8.1f} us; "
              f"NEURON 2 processes {two[name]:8.1f} us (ratio {two[name] / one[name]:.2f})", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=128, help="global batch")
    parser.add_argument("--hidden", type=int, default=128, help="hidden layer width (more compute per step)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per configuration; the median is shown")
    parser.add_argument("--transfer-mib", default="16,64", help="round-trip sizes in MiB; empty to skip")
    parser.add_argument("--transfers-only", action="store_true", help="skip the training runs")
    args = parser.parse_args(argv)
    if args.transfer_mib:
        print_transfers(args.transfer_mib)
    if args.transfers_only:
        return

    one = [sys.executable]
    two = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}"]
    configurations = {
        "NEURON, 1 process": (one, "NEURON"),
        "NEURON, 2 processes": (two, "NEURON"),
        "CPU backend, 1 process": (one, "CPU"),
    }
    step = {}
    for name, (launcher, device) in configurations.items():
        times = [run(launcher, device, args) for _ in range(args.repeats)]
        step[name] = statistics.median(times)
        print(f"{name:26s} {step[name] * 1e3:8.2f} ms/step  (runs: {', '.join(f'{t * 1e3:.2f}' for t in times)})",
              flush=True)
    cpu = step["CPU backend, 1 process"]
    print(f"global batch {args.batch_size}, hidden width {args.hidden}, {args.epochs} epochs")
    print(f"scaling ratio, 1 process / 2 processes on NEURON: {step['NEURON, 1 process'] / step['NEURON, 2 processes']:.2f}"
          " (2.00 = perfect)")
    print(f"ratio to the CPU backend: NEURON 1 process {step['NEURON, 1 process'] / cpu:.2f}, "
          f"NEURON 2 processes {step['NEURON, 2 processes'] / cpu:.2f}")


if __name__ == "__main__":
    main()
