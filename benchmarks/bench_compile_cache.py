"""The persistent compile cache: examples/train_digits_torch.py with a cold and a warm cache.

Runs the example twice on simulated NeuronCores (PJRT_DEVICE=NEURON) sharing one fresh cache
directory: the first run compiles every program and stores it, the second should load them
all. Prints each run's wall time (the whole process, imports included), the time the example
reports itself ("elapsed", training only), the plugin's compile counters from its
PJRT_NEURON_CACHE_METRICS line, and the ratio warm / cold (lower is better; 1.00 = no gain).

As references, the same two runs with the plugin's cache off (what the cache saves, and what
storing entries costs on a cold run), and on the stock CPU backend (PJRT_DEVICE=CPU) with no
persistent cache: torch-xla 2.9 cannot load executables from its own cache (pytorch/xla#9094),
so there a second run differs from the first only by warm OS caches.

One untimed run first warms the OS's file caches (torch and torch-xla imports), which would
otherwise make whichever run comes first look slow.

Benchmarks report; they never assert times.
Run: python benchmarks/bench_compile_cache.py [--epochs N] [--no-cache-off] [--no-cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "train_digits_torch.py"
ELAPSED = re.compile(r"elapsed: ([0-9.]+) s")
ACCURACY = re.compile(r"test accuracy: ([0-9.]+)")
METRICS = re.compile(r"^pjrt-neuron compile cache: (\{.*\})$", re.M)

# Settings inherited from the caller that would change what the runs do.
_SCRUBBED = ("PJRT_DEVICE", "CPU_NUM_DEVICES", "JAX_PLATFORMS", "NEURON_COMPILE_CACHE_URL", "PJRT_NEURON_COMPILE_CACHE",
             "PJRT_NEURON_COMPILE_CACHE_MAX_SIZE", "PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED",
             "PJRT_NEURON_GRAPH_COLLECTION", "PJRT_NEURON_CACHE_METRICS", "NEURON_CC_FLAGS",
             "XLA_PERSISTENT_CACHE_PATH", "PJRT_NEURON_INSTANCE_TYPE", "NEURON_RT_VISIBLE_CORES",
             "NEURON_RT_NUM_CORES")


@dataclass
class Run:
    wall: float
    elapsed: float
    accuracy: float | None
    metrics: dict | None


def run_example(epochs: int | None, **settings: str) -> Run:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PJRT_NEURON_LOCK_DIR"] = tempfile.mkdtemp(prefix="pjrt-neuron-bench-locks-")
    env.update(settings)
    argv = [sys.executable, str(EXAMPLE)] + (["--epochs", str(epochs)] if epochs else [])
    start = time.perf_counter()
    out = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - start
    elapsed = ELAPSED.search(out.stdout)
    # Exit 1 only says the accuracy bar was missed (short --epochs); the timing still counts.
    if out.returncode not in (0, 1) or elapsed is None:
        raise RuntimeError(f"{EXAMPLE.name} failed (exit {out.returncode}):\n{out.stdout}\n{out.stderr[-3000:]}")
    accuracy = ACCURACY.search(out.stdout)
    metrics = METRICS.findall(out.stderr)
    return Run(wall, float(elapsed.group(1)), float(accuracy.group(1)) if accuracy else None,
               json.loads(metrics[-1]) if metrics else None)


def describe(run: Run) -> str:
    text = f"wall {run.wall:6.1f} s  elapsed {run.elapsed:6.1f} s"
    if run.metrics is not None:
        m = run.metrics
        text += (f"  compiles {m['compiles']:3d}  hits {m['cache_hits']:3d}  "
                 f"compile {m['compile_seconds']:6.2f} s  written {m['bytes_written'] / 1024:7.1f} KiB")
    if run.accuracy is not None:
        text += f"  accuracy {run.accuracy:.4f}"
    return text


def report(name: str, cold: Run, warm: Run) -> None:
    print(f"{name}")
    print(f"  cold: {describe(cold)}")
    print(f"  warm: {describe(warm)}")
    print(f"  warm/cold: wall {warm.wall / cold.wall:.2f}   elapsed {warm.elapsed / cold.elapsed:.2f}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, help="passed to the example (default: the example's own, 20)")
    parser.add_argument("--no-cache-off", action="store_true", help="skip the NEURON runs with the cache off")
    parser.add_argument("--no-cpu", action="store_true", help="skip the stock CPU reference")
    args = parser.parse_args(argv)

    print(f"{EXAMPLE.name} --epochs {args.epochs or 'default'}; {os.cpu_count()} CPUs", flush=True)
    run_example(1, PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1")  # untimed: warms the OS's file caches
    with tempfile.TemporaryDirectory(prefix="pjrt-neuron-bench-cache-") as cache_dir:
        neuron = dict(PJRT_DEVICE="NEURON", NEURON_COMPILE_CACHE_URL=cache_dir, PJRT_NEURON_CACHE_METRICS="1")
        cold = run_example(args.epochs, **neuron)
        warm = run_example(args.epochs, **neuron)
        entries = len(list(Path(cache_dir).glob("*.entry")))
    report(f"neuron, compile cache cold -> warm ({entries} entries)", cold, warm)

    if not args.no_cache_off:
        with tempfile.TemporaryDirectory(prefix="pjrt-neuron-bench-cache-") as cache_dir:
            off = dict(PJRT_DEVICE="NEURON", NEURON_COMPILE_CACHE_URL=cache_dir, PJRT_NEURON_COMPILE_CACHE="0",
                       PJRT_NEURON_CACHE_METRICS="1")
            first, second = run_example(args.epochs, **off), run_example(args.epochs, **off)
        report("neuron, compile cache off (PJRT_NEURON_COMPILE_CACHE=0), run 1 -> run 2", first, second)
        print(f"  cache vs off: cold {cold.wall / first.wall:.2f}   warm {warm.wall / second.wall:.2f} (wall)")

    if not args.no_cpu:
        cpu = dict(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1")
        first, second = run_example(args.epochs, **cpu), run_example(args.epochs, **cpu)
        report("stock CPU backend (PJRT_DEVICE=CPU, no persistent cache), run 1 -> run 2", first, second)
        print(f"  neuron / cpu: cold {cold.wall / first.wall:.2f}   warm {warm.wall / second.wall:.2f} (wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
