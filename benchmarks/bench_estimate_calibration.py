"""The estimate against AWS's published Trainium / Inferentia2 results (benchmarks/calibration/):
prints, per row, the predicted and the published throughput of the instance and their ratio,
the fit rows apart from the held-out ones, and how many held-out rows fall within [0.67, 1.5].

    python benchmarks/bench_estimate_calibration.py            # from the committed work counts
    python benchmarks/bench_estimate_calibration.py --record   # rerun every row's script first
    python benchmarks/bench_estimate_calibration.py --fit      # search the fitted constants

--record runs each script on one simulated NeuronCore (JAX, Flax models from transformers 4.x;
minutes of CPU) and rewrites benchmarks/calibration/work_counts.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "calibration"))

import rows as calibration  # noqa: E402

from pjrt_neuron import estimator, estimator_model  # noqa: E402


def record(scripts: list[str]) -> None:
    """Runs each script and stores its programs' counts, one script at a time (a failure keeps
    what was recorded before it)."""
    counts = calibration.load_work_counts() if os.path.exists(calibration.WORK_COUNTS) else {}
    for script in scripts or sorted({row["script"] for row in calibration.ROWS}):
        with tempfile.TemporaryDirectory() as tmp:
            report = os.path.join(tmp, "records.jsonl")
            env = dict(os.environ, JAX_PLATFORMS="neuron,cpu", PJRT_NEURON_ESTIMATE_REPORT=report,
                       TF_CPP_MIN_LOG_LEVEL="2")
            subprocess.run([sys.executable, script + ".py"], cwd=calibration.HERE, env=env, check=True)
            programs, _, _ = estimator.read_records(report)
        counts[script] = [{"program_id": p.program_id, "program": p.name, "num_replicas": p.num_replicas,
                           "num_partitions": p.num_partitions, "executions": p.executions, "cost": p.cost}
                          for p in programs.values() if p.executions > 0]
        with open(calibration.WORK_COUNTS, "w") as f:
            json.dump(counts, f, indent=1, sort_keys=True)
        print(f"recorded {script}: {len(counts[script])} program(s)", flush=True)


def print_table(results: list[dict]) -> None:
    for title, fit in (("fitted rows", True), ("held-out rows (predictions)", False)):
        print(f"\n{title}:")
        print(f"  {'row':<52} {'predicted/s':>11} {'published/s':>11} {'ratio':>6}  SDK     source")
        for r in results:
            if r["fit"] == fit:
                flag = "" if calibration.within(r["ratio"]) else "  <- outside [0.67, 1.5]"
                print(f"  {r['name']:<52} {r['predicted']:>11.1f} {r['published']:>11.1f} {r['ratio']:>6.2f}  "
                      f"{r['sdk']:<7} {r['source']}{flag}")
    for kind in ("inference", "training"):
        held = [r for r in results if not r["fit"] and r["kind"] == kind]
        if held:
            inside = sum(calibration.within(r["ratio"]) for r in held)
            print(f"held-out {kind}: {inside} of {len(held)} within [0.67, 1.5]; ratios "
                  f"{min(r['ratio'] for r in held):.2f} to {max(r['ratio'] for r in held):.2f}")


GRID = {
    "pe_sustained_fraction": [0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7],
    "pe_instruction_overhead_cycles": [16, 32, 64, 128],
    "element_engine_fraction": [0.25, 0.35, 0.5, 0.7, 1.0],
    "engine_overlap": [0.0, 0.25, 0.5, 0.75, 1.0],
    "launch_seconds": [20e-6, 40e-6, 60e-6, 100e-6, 150e-6, 200e-6],  # nrt_execute takes tens of us
}


def fit(work: dict) -> None:
    """Grid search minimising the squared log ratio over the fit rows only."""
    saved = dict(estimator_model.CONSTANTS)
    fit_rows = [r for r in calibration.ROWS if r["fit"]]
    best = None
    try:
        for values in itertools.product(*GRID.values()):
            for name, value in zip(GRID, values):
                estimator_model.CONSTANTS[name] = estimator_model.Constant(value, "fit")
            error = sum(math.log(calibration.predict(r, work[r["script"]])["ratio"]) ** 2 for r in fit_rows)
            if best is None or error < best[0]:
                best = (error, dict(zip(GRID, values)))
    finally:
        estimator_model.CONSTANTS.update(saved)
    print("(the table below uses the committed constants; copy the fit into estimator_model.CONSTANTS to use it)")
    print(f"best fit (squared log error {best[0]:.4f}): {best[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", nargs="*", metavar="SCRIPT",
                        help="rerun these rows' scripts (default: every one) and store their counts")
    parser.add_argument("--fit", action="store_true", help="search the fitted constants on the fit rows")
    args = parser.parse_args()
    if args.record is not None:
        record(args.record)
    work = calibration.load_work_counts()
    if args.fit:
        fit(work)
    print_table(calibration.evaluate(work))


if __name__ == "__main__":
    main()
