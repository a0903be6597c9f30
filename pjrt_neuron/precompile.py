"""`pjrt-neuron precompile -- python train.py ...`: record every program the script compiles, then
compile them in parallel worker processes into the compile cache, so the next normal run
compiles nothing (the workflow of Neuron's neuron_parallel_compile)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from pjrt_neuron import _native, cache, config

COMPILED, CACHED, FAILED = "compiled", "cached", "failed"


def _compile_record(path: str) -> tuple[str, str, str]:
    """In a worker process: compile one recorded program into the cache."""
    result, message = _native.precompile_program(path)
    outcome = {0: COMPILED, 1: CACHED}.get(result, FAILED)
    return path, outcome, message


def collect(command: list[str], directory: Path) -> int:
    env = dict(os.environ, PJRT_NEURON_GRAPH_COLLECTION=str(directory))
    return subprocess.call(command, env=env)


def compile_all(records: list[Path], workers: int) -> list[tuple[str, str, str]]:
    if not records:
        return []
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(records)))) as pool:
        return list(pool.map(_compile_record, [str(r) for r in records]))


def main(command: list[str], workers: int | None = None) -> int:
    if not command:
        print("pjrt-neuron precompile: give the command after --, e.g. `pjrt-neuron precompile -- python train.py`",
              file=sys.stderr)
        return 2
    config.prepare_environment()
    workers = workers or os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="pjrt-neuron-graphs-") as tmp:
        print(f"pjrt-neuron precompile: collecting programs from {' '.join(command)} "
              "(results of this run are not meaningful)", flush=True)
        returncode = collect(command, Path(tmp))
        records = sorted(Path(tmp).glob("*.program"))
        start = time.monotonic()
        results = compile_all(records, workers)
        elapsed = time.monotonic() - start
    counts = {outcome: sum(1 for _, o, _ in results if o == outcome) for outcome in (COMPILED, CACHED, FAILED)}
    print(f"pjrt-neuron precompile: {len(records)} program(s): {counts[COMPILED]} compiled, "
          f"{counts[CACHED]} already in the cache, {counts[FAILED]} failed, in {elapsed:.1f} s with {workers} "
          f"worker(s); cache: {cache.directory()}")
    for path, outcome, message in results:
        if outcome == FAILED:
            print(f"  failed: {Path(path).name}: {message}")
    if returncode != 0:
        print(f"pjrt-neuron precompile: note: the collection run exited with {returncode} "
              "(expected when a script checks its results)")
    return 1 if counts[FAILED] else 0
