"""The native `neuron` device in eager mode, as ratios against references measured in the same run.

1. One small op (add of two 1,024-element float32 tensors, its program cached) on `neuron` against
   the same op on PyTorch's CPU device. Goal: within 3x.
2. One training step of the digits MLP (64-128-10, batch 64, Adam) eager on `neuron` against the
   same step eager on the CPU and, when a torch-xla venv is given, torch-xla 2.9's lazy step of the
   same model on the same engine (PJRT_DEVICE=NEURON), run in that venv's python.

    python benchmarks/bench_native_eager.py [--torch-xla-python .venv-torch-xla/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import torch

ROUNDS = 7


def median_seconds(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        times.append((time.perf_counter() - start) / repeat)
    return statistics.median(times)


def small_op(device: str) -> float:
    a = torch.rand(1024, device=device)
    b = torch.rand(1024, device=device)
    return median_seconds(lambda: a + b, 500)


TRAINING_STEP = """
import time, statistics, torch
{prelude}
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
{wrap_model}
x = torch.randn(64, 64).to(device)
y = torch.randint(0, 10, (64,)).to(device)
def step():
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    {sync}
{wrap_step}
start = time.perf_counter()
step()
first = time.perf_counter() - start
for _ in range(2):
    step()
times = []
for _ in range({rounds}):
    start = time.perf_counter()
    for _ in range(20):
        step()
    times.append((time.perf_counter() - start) / 20)
print(first, statistics.median(times))
"""


def training_step(python: str, prelude: str, sync: str, wrap_model: str = "", wrap_step: str = "") -> float:
    """Median seconds of a step."""
    return first_and_median_step(python, prelude, sync, wrap_model, wrap_step)[1]


def first_and_median_step(python: str, prelude: str, sync: str, wrap_model: str = "", wrap_step: str = "") -> tuple:
    code = TRAINING_STEP.format(prelude=prelude, sync=sync, rounds=ROUNDS, wrap_model=wrap_model, wrap_step=wrap_step)
    # A simulated instance of its own: this process holds its cores.
    env = {**os.environ, "PJRT_NEURON_LOCK_DIR": tempfile.mkdtemp(prefix="bench-native-")}
    run = subprocess.run([python, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=900, env=env)
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-2000:])
    first, median = run.stdout.strip().splitlines()[-1].split()
    return float(first), float(median)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-xla-python", help="a python with torch-xla 2.9 and pjrt-neuron installed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    results = {"torch": torch.__version__}
    cpu = small_op("cpu")
    neuron = small_op("neuron")
    results["small_op"] = {"cpu_us": cpu * 1e6, "neuron_us": neuron * 1e6, "ratio": neuron / cpu}

    step_cpu = training_step(sys.executable, "device = 'cpu'", "")
    step_neuron = training_step(sys.executable, "device = 'neuron'", "loss.item()")
    results["training_step"] = {"cpu_eager_ms": step_cpu * 1e3, "neuron_eager_ms": step_neuron * 1e3,
                                "neuron_over_cpu": step_neuron / step_cpu}
    if args.torch_xla_python:
        step_xla = training_step(
            args.torch_xla_python,
            "import os; os.environ['PJRT_DEVICE'] = 'NEURON'\nimport torch_xla\ndevice = torch_xla.device()",
            "torch_xla.sync(); loss.item()")
        results["training_step"].update({"torch_xla_lazy_ms": step_xla * 1e3,
                                         "neuron_eager_over_torch_xla_lazy": step_neuron / step_xla})

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    small, step = results["small_op"], results["training_step"]
    print(f"torch {results['torch']}, medians of {ROUNDS} rounds")
    print(f"{'measure':58} {'reference':>12} {'neuron':>12} {'ratio':>8}")
    print(f"{'small op: add of two 1,024-element tensors (vs CPU eager)':58} {small['cpu_us']:10.1f}us "
          f"{small['neuron_us']:10.1f}us {small['ratio']:8.2f}")
    print(f"{'digits MLP training step, eager (vs CPU eager)':58} {step['cpu_eager_ms']:10.2f}ms "
          f"{step['neuron_eager_ms']:10.2f}ms {step['neuron_over_cpu']:8.2f}")
    if "torch_xla_lazy_ms" in step:
        print(f"{'digits MLP training step, eager (vs torch-xla 2.9 lazy, same engine)':58} "
              f"{step['torch_xla_lazy_ms']:10.2f}ms {step['neuron_eager_ms']:10.2f}ms "
              f"{step['neuron_eager_over_torch_xla_lazy']:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
