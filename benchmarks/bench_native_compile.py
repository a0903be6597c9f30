"""`torch.compile(backend="neuron")`: a compiled training step, as ratios against references
measured in the same run (the digits MLP of bench_native_eager.py: 64-128-10, batch 64, Adam).

    (a) the same step eager on `neuron` (and, beside it, the whole step compiled: the model and
        `opt.step()`);
    (b) torch-xla 2.9's lazy step of the same model on the same engine (PJRT_DEVICE=NEURON), run
        in the torch-xla venv's python when one is given. Goal: compiled / lazy <= 1.0;
    (c) torch.compile with the default inductor backend on the CPU;
and the first step's time (compiles included) against torch-xla's first step.

    python benchmarks/bench_native_compile.py [--torch-xla-python .venv-torch-xla/bin/python]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_native_eager import ROUNDS, first_and_median_step  # noqa: E402

COMPILE_MODEL = "model = torch.compile(model, backend={backend!r})"
COMPILE_STEP = "step = torch.compile(step, backend={backend!r})"  # opt.step() inside: its graph too
TORCH_XLA = "import os; os.environ['PJRT_DEVICE'] = 'NEURON'\nimport torch_xla\ndevice = torch_xla.device()"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-xla-python", help="a python with torch-xla 2.9 and pjrt-neuron installed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    python = sys.executable
    rows = {
        "neuron, model compiled (optimizer eager)": first_and_median_step(python, "device = 'neuron'", "loss.item()",
                                                  COMPILE_MODEL.format(backend="neuron")),
        "neuron, whole step compiled": first_and_median_step(python, "device = 'neuron'", "loss.item()", "",
                                                             COMPILE_STEP.format(backend="neuron")),
        "neuron, eager": first_and_median_step(python, "device = 'neuron'", "loss.item()"),
        "CPU, torch.compile (inductor)": first_and_median_step(python, "device = 'cpu'", "loss.item()",
                                                               COMPILE_MODEL.format(backend="inductor")),
    }
    if args.torch_xla_python:
        rows["torch-xla 2.9 lazy, same engine"] = first_and_median_step(
            args.torch_xla_python, TORCH_XLA, "torch_xla.sync(); loss.item()")
    compiled_first, compiled = rows["neuron, whole step compiled"]
    results = {name: {"first_step_s": first, "step_ms": step * 1e3,
                      "compiled_over_this": compiled / step, "first_step_ratio": compiled_first / first}
               for name, (first, step) in rows.items()}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"digits MLP training step (Adam, batch 64), medians of {ROUNDS} rounds of 20 steps")
    print("compiled = the whole step (model and opt.step) under torch.compile(backend='neuron')")
    print(f"{'reference':40} {'step':>10} {'compiled/ref':>13} {'first step':>11} {'compiled/ref':>13}")
    for name, row in results.items():
        print(f"{name:40} {row['step_ms']:8.2f}ms {row['compiled_over_this']:13.2f} "
              f"{row['first_step_s']:10.2f}s {row['first_step_ratio']:13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
