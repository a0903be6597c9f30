"""Simulated NeuronCores against the stock CPU backends, measured in the same run.

Prints one line per measurement with the ratio neuron / cpu (1.00 = as fast as stock CPU;
higher is slower). Run: python benchmarks/bench_foundation.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def best_of(fn, repeats: int, number: int) -> float:
    """Seconds per call: the median over `repeats` runs of `number` calls."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def report(name: str, neuron: float, cpu: float, unit: str = "ms") -> None:
    scale = 1e3 if unit == "ms" else 1.0
    print(f"{name:<38} neuron {neuron * scale:9.3f} {unit}   cpu {cpu * scale:9.3f} {unit}   ratio {neuron / cpu:6.2f}")


def bench_jax(quick: bool) -> None:
    os.environ["JAX_PLATFORMS"] = "neuron,cpu"
    import jax
    import jax.numpy as jnp
    import numpy as np

    neuron, cpu = jax.devices("neuron")[0], jax.devices("cpu")[0]
    repeats = 3 if quick else 7

    def on(device, fn, *arrays):
        placed = [jax.device_put(a, device) for a in arrays]
        jitted = jax.jit(fn)
        jax.block_until_ready(jitted(*placed))  # compile outside the timing
        return lambda: jax.block_until_ready(jitted(*placed))

    small = np.ones((8,), np.float32)
    report("jax dispatch (8-element add)",
           best_of(on(neuron, lambda x: x + 1, small), repeats, 200),
           best_of(on(cpu, lambda x: x + 1, small), repeats, 200))

    a = np.random.default_rng(0).standard_normal((512, 512), dtype=np.float32)
    report("jax matmul 512x512 f32",
           best_of(on(neuron, jnp.matmul, a, a), repeats, 20),
           best_of(on(cpu, jnp.matmul, a, a), repeats, 20))

    big = np.ones((4 * 1024 * 1024,), np.float32)  # 16 MiB
    def round_trip(device):
        return lambda: np.asarray(jax.device_put(big, device))
    report("jax host->device->host 16 MiB",
           best_of(round_trip(neuron), repeats, 5),
           best_of(round_trip(cpu), repeats, 5))


ELAPSED = re.compile(r"elapsed: ([0-9.]+) s")


def example_seconds(script: str, env_update: dict[str, str], epochs: int) -> float:
    env = dict(os.environ, **env_update)
    out = subprocess.run([sys.executable, str(REPO / "examples" / script), "--epochs", str(epochs)],
                         env=env, capture_output=True, text=True, timeout=900)
    match = ELAPSED.search(out.stdout)
    if match is None:
        raise RuntimeError(f"{script} printed no timing:\n{out.stdout}\n{out.stderr[-2000:]}")
    return float(match.group(1))


def bench_examples(quick: bool) -> None:
    epochs = 5 if quick else 20
    # The stock backends have no persistent compile cache, so neither may the plugin here.
    no_cache = {"PJRT_NEURON_COMPILE_CACHE": "0"}
    report(f"torch-xla digits training ({epochs} epochs)",
           example_seconds("train_digits_torch.py", {"PJRT_DEVICE": "NEURON", **no_cache}, epochs),
           example_seconds("train_digits_torch.py", {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "1"}, epochs), "s")
    report(f"jax digits training ({epochs} epochs)",
           example_seconds("train_digits_jax.py", {"JAX_PLATFORMS": "neuron", **no_cache}, epochs),
           example_seconds("train_digits_jax.py", {"JAX_PLATFORMS": "cpu"}, epochs), "s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and epochs")
    args = parser.parse_args()
    bench_examples(args.quick)
    bench_jax(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
