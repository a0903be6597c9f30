"""From per-program estimates to the instance's answer: what a step is, how the job fills the
instance, and the step time, throughput and cost that follow.

A step is one execution of the most-run program that does matrix work; each core's estimated busy
time over whole steps (from the first to the last execution of that program) is summed, and the
busiest core sets the step's time.
"""

from __future__ import annotations

from collections import defaultdict

from pjrt_neuron.estimation import EstimateError
from pjrt_neuron.estimation.model import CONSTANTS, Target, constant, estimate_program
from pjrt_neuron.estimation.records import Program


def step_window(programs: dict[str, Program], executions: list[dict]) -> tuple[int, str | None, list[dict]]:
    """What repeats: the step is one execution of the most-run program that does matrix work
    (the marker). Returns the steps, the marker, and the executions of whole steps: those after
    the marker's first execution up to its last (steps - 1 periods), or with one step, all up to it.
    What ran before the first step is setup; after the last, teardown."""
    ran = [p for p in programs.values() if p.executions > 0]
    if not ran:
        return 0, None, []
    working = [p for p in ran if sum(p.cost["matmul_flops"].values()) > 0] or ran
    marker = max(working, key=lambda p: (p.executions, sum(p.cost["matmul_flops"].values()))).program_id
    marks = [i for i, e in enumerate(executions) if e["program_id"] == marker]
    window = executions[marks[0] + 1:marks[-1] + 1] if len(marks) > 1 else executions[:marks[0] + 1]
    return len(marks), marker, window


DEPLOYMENTS = ("copies", "data-parallel", "as-run")


def deployment(mode: str, target: Target, cores_used: int) -> dict:
    """How the script's job fills the instance: `copies` runs independent copies of it (one a
    core when it used one), `data-parallel` runs its per-core work on every core with its
    collectives widened to all of them, `as-run` only what the script used."""
    k = max(cores_used, 1)
    total = target.total_cores
    if mode not in DEPLOYMENTS:
        raise EstimateError(f"--deployment {mode!r}: expected one of {', '.join(DEPLOYMENTS)}")
    if k > total:
        raise EstimateError(f"the run used {k} NeuronCores, but {target.name} has {total}")
    if mode == "as-run":
        return {"mode": mode, "copies": 1, "collective_cores": None,
                "description": f"as the script ran: {k} of {total} NeuronCore(s) busy, the instance paid in full"}
    if mode == "copies":
        return {"mode": mode, "copies": total // k, "collective_cores": None,
                "description": f"{total // k} independent copies of the script's job, {k} NeuronCore(s) each"}
    return {"mode": mode, "copies": total // k, "collective_cores": total,
            "description": f"data parallel over all {total} NeuronCores, the script's collectives widened to them"}


def calibration_range(value: float) -> tuple[float, float]:
    """A throughput's low and high from the calibration's held-out ratios (predicted / published)."""
    return value / constant("calibration_ratio_high"), value / constant("calibration_ratio_low")


def estimate_for(target: Target, programs: dict[str, Program], executions: list[dict], auto_cast: str,
                 per_step: float, unit: str, baseline: tuple[float, float] | None,
                 deployment_mode: str = "copies") -> dict:
    used = sorted({d for e in executions for d in e["devices"]})
    if used and used[-1] >= target.total_cores:
        raise EstimateError(f"the run used NeuronCores up to {used[-1]}, but {target.name} has "
                            f"{target.total_cores} (at logical NeuronCore config {target.logical_nc_config})")
    deployed = deployment(deployment_mode, target, len(used))
    per_program = {pid: estimate_program(p, target, auto_cast, deployed["collective_cores"])
                   for pid, p in programs.items()}
    steps, _, window = step_window(programs, executions)
    periods = max(steps - 1, 1)
    busy_run = defaultdict(float)
    busy_step = defaultdict(float)
    program_step_seconds = defaultdict(float)
    flops_step = 0.0
    for e in executions:
        est = per_program.get(e["program_id"])
        if est is not None:
            for d in e["devices"]:
                busy_run[d] += est.seconds
    for e in window:
        est = per_program.get(e["program_id"])
        if est is not None:
            program_step_seconds[e["program_id"]] += est.seconds / periods
            for d in e["devices"]:
                busy_step[d] += est.seconds
                flops_step += est.matmul_flops
    run_seconds = max(busy_run.values(), default=0.0)
    step_seconds = max(busy_step.values(), default=0.0) / periods
    flops_step = flops_step / periods
    peak = target.peak_flops_per_second() * max(len(busy_step), 1)
    result = {
        "instance_type": target.name,
        "core_generation": target.core_generation,
        "logical_nc_config": target.logical_nc_config,
        "cores_used": len(used),
        "steps": steps,
        "step_seconds": step_seconds,
        "run_seconds": run_seconds,
        "model_flops_per_step": flops_step,
        "mfu": flops_step / (step_seconds * peak) if step_seconds > 0 else 0.0,
        "unit": unit,
        "units_per_step": per_step,
        "deployment": deployed,
        "latency_p50_seconds": step_seconds,
        "throughput_per_copy_units_per_second": per_step / step_seconds if step_seconds > 0 else 0.0,
        "throughput_units_per_second": deployed["copies"] * per_step / step_seconds if step_seconds > 0 else 0.0,
        "price_per_hour": target.price_per_hour,
        "cost_per_million_units": None,
        "range": {},
        "programs": [],
    }
    throughput = result["throughput_units_per_second"]
    if step_seconds > 0:
        low, high = calibration_range(throughput)
        result["range"] = {"throughput_units_per_second": [low, high],
                           "latency_p50_seconds": [step_seconds * throughput / high, step_seconds * throughput / low],
                           "checked_against": CONSTANTS["calibration_ratio_low"].source}
    if target.price_per_hour is not None and step_seconds > 0:
        result["cost_per_million_units"] = cost_per_million(target.price_per_hour, throughput)
        result["range"]["cost_per_million_units"] = [cost_per_million(target.price_per_hour, high),
                                                     cost_per_million(target.price_per_hour, low)]
    if baseline is not None:
        price, throughput = baseline
        baseline_cost = cost_per_million(price, throughput)
        result["baseline_cost_per_million_units"] = baseline_cost
        result["baseline_throughput_units_per_second"] = throughput
        if result["cost_per_million_units"]:
            result["cost_ratio_vs_baseline"] = result["cost_per_million_units"] / baseline_cost
        if result["throughput_units_per_second"]:
            result["speedup_vs_baseline"] = result["throughput_units_per_second"] / throughput
    for pid, p in sorted(programs.items(), key=lambda kv: -per_program[kv[0]].seconds * kv[1].executions):
        est = per_program[pid]
        result["programs"].append({
            "program": p.name, "program_id": pid, "executions": p.executions, "cores": sorted(p.devices),
            "in_step": pid in program_step_seconds, "matmul_flops": p.cost["matmul_flops"],
            "vector_ops": p.cost["vector_ops"],
            "transcendental_ops": p.cost["transcendental_ops"],
            "hbm_bytes": p.cost["parameter_bytes"] + p.cost["output_bytes"], "link_bytes": est.link_bytes,
            "collectives": p.cost["collectives"], "seconds": est.seconds, "bound": est.bound,
            "parts_seconds": est.parts,
            "share_of_step": program_step_seconds.get(pid, 0.0) / step_seconds if step_seconds > 0 else 0.0,
            "unknown_trip_count": p.cost["unknown_trip_count"],
        })
    return result


def cost_per_million(price_per_hour: float, units_per_second: float) -> float:
    """What a million units cost on an instance paid by the hour, at the instance's throughput."""
    return 1e6 / units_per_second * price_per_hour / 3600
