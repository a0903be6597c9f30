"""`pjrt-neuron estimate -- python train.py`, `pjrt_neuron.estimate()` and PJRT_NEURON_ESTIMATE=1:
run a script (or a block, or a process) on simulated NeuronCores, record every program it
compiles (its work counts, read from the HLO by the plugin) and every execution (which cores),
and estimate the time a step would take on Trainium and what a million units would cost.

The model, in one place (the README's "Size before you rent" says the same in prose):
- per program and core, a roofline: the TensorEngine's time (FLOPs at the operand type's rate),
  the Vector and Scalar engines' (element operations at their FP32 rates) overlap one another and
  the HBM traffic (parameters read + results written, at the core's share of the chip's
  bandwidth); collectives follow, unoverlapped, as rings (bytes over the link bandwidth plus a
  latency a step); a fixed launch cost is added to every execution;
- per step: each core's estimated busy time over whole steps (from the first to the last
  execution of the most-run program that does matrix work), the busiest core setting the step's
  time.
Figures come from the plugin's tables (instance types with prices, per-generation rates).
"""

from __future__ import annotations

from collections import Counter

import atexit
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field

from pjrt_neuron import _native
from pjrt_neuron import estimator_model as model

MODEL_NAME = "pjrt-neuron NeuronCore model v2 (tiles, spills, engine overlap; calibrated)"


class EstimateError(Exception):
    """Bad arguments or nothing to estimate: the message says which and why."""


# ---------------------------------------------------------------- records


@dataclass
class Program:
    program_id: str
    name: str
    num_replicas: int
    num_partitions: int
    cost: dict
    executions: int = 0
    device_executions: int = 0  # executions x cores
    devices: set = field(default_factory=set)


def read_records(path: str, since_us: int = 0, until_us: int | None = None
                 ) -> tuple[dict[str, Program], list[dict], dict]:
    """Programs by id, executions in order (those that started within the window), and the
    simulated instance the run used."""
    programs: dict[str, Program] = {}
    executions: list[dict] = []
    simulated = {}
    if not os.path.exists(path):
        return programs, executions, simulated
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            record = json.loads(line)
            if record["record"] == "program":
                programs[record["program_id"]] = Program(record["program_id"], record["program"],
                                                         record["num_replicas"], record["num_partitions"],
                                                         record["cost"])
                simulated = {"instance_type": record["instance_type"],
                             "logical_nc_config": record["logical_nc_config"]}
            elif record["record"] == "execution":
                if record["start_us"] >= since_us and (until_us is None or record["start_us"] <= until_us):
                    executions.append(record)
    for e in executions:
        p = programs.get(e["program_id"])
        if p is not None:
            p.executions += 1
            p.device_executions += len(e["devices"])
            p.devices.update(e["devices"])
    executions.sort(key=lambda e: e["start_us"])
    return programs, executions, simulated


def run_with_recording(command: list[str]) -> tuple[int, dict[str, Program], list[dict], dict]:
    with tempfile.TemporaryDirectory(prefix="pjrt-neuron-estimate-") as tmp:
        report = os.path.join(tmp, "estimate.jsonl")
        env = dict(os.environ, PJRT_NEURON_ESTIMATE_REPORT=report)
        try:
            returncode = subprocess.call(command, env=env)
        except OSError as error:
            raise EstimateError(f"could not run {command[0]!r}: {error.strerror}") from None
        return (returncode, *read_records(report))


# ---------------------------------------------------------------- the model


@dataclass
class Target:
    """An instance to estimate for, with the figures the model needs per logical core."""
    name: str
    price_per_hour: float | None
    core_generation: str
    logical_nc_config: int
    total_cores: int
    cores_per_chip: int  # logical
    physical_cores_per_chip: int
    figures: dict

    def share(self) -> float:
        """A logical core's share of its chip."""
        return self.logical_nc_config / self.physical_cores_per_chip

    def matmul_flops_per_second(self, type_class: str, auto_cast: str) -> float:
        g = self.figures
        if type_class in ("bf16", "fp16") or (type_class == "fp32" and auto_cast == "matmult"):
            tflops = g["matmul_tflops_bf16"]
        elif type_class == "fp8":
            tflops = g["matmul_tflops_fp8"]
        else:
            tflops = g["matmul_tflops_fp32"]
        return tflops * 1e12 * self.share()

    def peak_flops_per_second(self) -> float:
        return self.figures["matmul_tflops_bf16"] * 1e12 * self.share()


def make_target(name: str, prices: dict[str, float], logical_nc_config: int | None = None) -> Target:
    types = {t["name"]: t for t in _native.instance_types()}
    if name not in types:
        raise EstimateError(f"unknown instance type {name!r}; known: {', '.join(types)}")
    t = types[name]
    generations = {g["core_generation"]: g for g in _native.core_generations()}
    if t["core_generation"] not in generations:
        raise EstimateError(f"{name}: no figures for {t['core_generation']} in the plugin's table")
    shape = _native.describe_instance(name, logical_nc_config or 0)
    price = prices.get(name, t["on_demand_usd_per_hour"] or None)
    return Target(name, price, t["core_generation"], shape["logical_nc_config"], shape["total_cores"],
                  shape["chips"][0]["cores"], t["physical_cores_per_chip"], generations[t["core_generation"]])


def _ring_bytes(kind: str, data_bytes: int, n: int) -> float:
    """Bytes each participant sends in a ring implementation of the collective."""
    if n <= 1:
        return 0.0
    if kind == "all-reduce":
        return 2.0 * (n - 1) / n * data_bytes
    if kind in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n * data_bytes
    return float(data_bytes)  # collective-permute, collective-broadcast: one hop


def _ring_steps(kind: str, n: int) -> int:
    if n <= 1:
        return 0
    return 2 * (n - 1) if kind == "all-reduce" else (1 if kind in ("collective-permute",) else n - 1)


def collective_seconds(kind: str, data_bytes: float, n: int, target: Target) -> tuple[float, float]:
    """Time and bytes sent per participant of one collective over n cores. Within a chip the cores
    exchange through its HBM; a group spanning chips runs hierarchically: reduced inside each
    chip, then a ring across the chips over NeuronLink, each chip's link bandwidth shared by its
    cores' traffic only once (the in-chip step leaves one shard per core to send)."""
    g = target.figures
    sent = _ring_bytes(kind, data_bytes, n)
    step = model.constant("collective_step_seconds")
    if n <= target.cores_per_chip:
        return sent / (g["hbm_bytes_per_second"] * target.share()) + _ring_steps(kind, n) * step, sent
    chips = math.ceil(n / target.cores_per_chip)
    across = _ring_bytes(kind, data_bytes, chips) / g["link_bytes_per_second"]
    within = _ring_bytes(kind, data_bytes, target.cores_per_chip) / (g["hbm_bytes_per_second"] * target.share())
    return across + within + (_ring_steps(kind, chips) + _ring_steps(kind, target.cores_per_chip)) * step, sent


def tensor_engine_seconds(cost: dict, target: Target, auto_cast: str) -> float:
    """Each matrix product at the cycles its tiles take (estimator_model.matmul_cycles), at the
    clock its type's rate implies; counts from before matmul shapes were recorded fall back to
    FLOPs at the peak rate."""
    per_cycle = 2 * model.constant("pe_partitions") * model.constant("pe_stationary_columns")
    seconds = 0.0
    if cost.get("matmuls") is None:
        seconds = sum(f / target.matmul_flops_per_second(t, auto_cast) for t, f in cost["matmul_flops"].items())
    for m in cost.get("matmuls") or ():
        clock = target.matmul_flops_per_second(m["type"], auto_cast) / per_cycle
        seconds += m["count"] * model.matmul_cycles(m["m"], m["k"], m["n"], m["batch"]) / clock
    return seconds / model.constant("pe_sustained_fraction")


@dataclass
class ProgramEstimate:
    seconds: float
    bound: str
    parts: dict
    link_bytes: float
    matmul_flops: float


def estimate_program(p: Program, target: Target, auto_cast: str, collective_cores: int | None = None
                     ) -> ProgramEstimate:
    """One execution on one logical core. `collective_cores` widens the collectives that span
    every core of the run to that many cores (data parallel over the instance)."""
    cost = p.cost
    g = target.figures
    element_rate = 1e12 * target.logical_nc_config * model.constant("element_engine_fraction")
    tensor = tensor_engine_seconds(cost, target, auto_cast)
    vector = cost["vector_ops"] / (g["vector_tflops_per_core"] * element_rate)
    scalar = cost["transcendental_ops"] / (g["scalar_tflops_per_core"] * element_rate)
    spilled = model.spilled_bytes(cost.get("intermediates") or [], g["sbuf_bytes_per_core"] * target.logical_nc_config)
    hbm_rate = g["hbm_bytes_per_second"] * target.share() * model.constant("hbm_efficiency")
    # --auto-cast matmult: neuronx-cc casts FP32 matmul operands, the weights among them, to BF16,
    # so the weights are read at half their bytes.
    parameter_bytes = cost["parameter_bytes"] / (2 if auto_cast == "matmult" else 1)
    memory = (parameter_bytes + cost["output_bytes"] + spilled) / hbm_rate
    engines = model.serialised([tensor, vector, scalar, memory])
    participants = max(p.num_replicas * p.num_partitions, 1)
    collectives = 0.0
    link_bytes = 0.0
    for c in cost["collectives"]:
        n = c["group_size"] or participants
        if collective_cores and n == participants:
            n = collective_cores
        seconds, sent = collective_seconds(c["kind"], c["bytes"], n, target)
        collectives += seconds * c["count"]
        link_bytes += sent * c["count"]
    launch = model.constant("launch_seconds")
    compute = max(tensor, vector, scalar)
    parts = {"compute": compute, "memory": memory, "collectives": collectives, "launch": launch,
             "tensor_engine": tensor, "vector_engine": vector, "scalar_engine": scalar,
             "spilled_hbm_bytes": spilled, "engines": engines}
    seconds = engines + collectives + launch
    bound = max(("compute", "memory", "collectives", "launch"), key=parts.get)
    return ProgramEstimate(seconds, bound, parts, link_bytes, sum(cost["matmul_flops"].values()))


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
    return value / model.constant("calibration_ratio_high"), value / model.constant("calibration_ratio_low")


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
                           "checked_against": model.CONSTANTS["calibration_ratio_low"].source}
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


# ---------------------------------------------------------------- the trace


def _last_step(programs: dict[str, Program], executions: list[dict]) -> tuple[int, int]:
    """Where the last step's executions lie in `executions`, as [start, end): after the marker's
    last-but-one execution up to its last."""
    steps, marker, _ = step_window(programs, executions)
    if not steps:
        return 0, 0
    marks = [i for i, e in enumerate(executions) if e["program_id"] == marker]
    return (marks[-2] + 1 if len(marks) > 1 else 0), marks[-1] + 1


def write_trace(path: str, target: Target, programs: dict[str, Program], executions: list[dict],
                auto_cast: str) -> None:
    """A Chrome / Perfetto trace of one step: a track per NeuronCore, a span per execution at its
    estimated duration (named by what bounds it), collectives as flows across the cores they
    join, and the host gaps the simulator measured between executions on a core."""
    estimates = {pid: estimate_program(p, target, auto_cast) for pid, p in programs.items()}
    colours = {"compute": "good", "memory": "bad", "collectives": "terrible", "launch": "grey"}
    events = [{"name": "process_name", "ph": "M", "pid": 0, "args": {
        "name": f"{target.name}: one step, estimated ({MODEL_NAME})"}}]
    clock: dict[int, float] = {}      # each core's estimated time, microseconds
    last_end: dict[int, int] = {}     # each core's last measured end on the simulator
    flow_id = 0
    start, end = _last_step(programs, executions)
    for e in executions[:start]:  # where each core's host gap before the step begins
        last_end.update({d: e["end_us"] for d in e["devices"]})
    for e in executions[start:end]:
        est = estimates.get(e["program_id"])
        if est is None:
            continue
        p = programs[e["program_id"]]
        starts = []
        for d in e["devices"]:
            if d not in clock:
                clock[d] = 0.0
                events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": d,
                               "args": {"name": f"NeuronCore {d}"}})
            if d in last_end and e["start_us"] > last_end[d]:
                gap = e["start_us"] - last_end[d]
                events.append({"name": "host gap (simulator)", "cat": "host", "ph": "X", "pid": 0, "tid": d,
                               "ts": clock[d], "dur": gap, "cname": "generic_work",
                               "args": {"measured_us": gap}})
                clock[d] += gap
            last_end[d] = e["end_us"]
            starts.append(clock[d])
        # An execution over several cores starts when the last of them is free.
        ts = max(starts)
        for d in e["devices"]:
            clock[d] = ts + est.seconds * 1e6
            events.append({"name": p.name, "cat": est.bound, "ph": "X", "pid": 0, "tid": d, "ts": ts,
                           "dur": est.seconds * 1e6, "cname": colours[est.bound],
                           "args": {"bound": est.bound, **{k + "_us": v * 1e6 for k, v in est.parts.items()
                                                           if k != "spilled_hbm_bytes"},
                                    "matmul_flops": est.matmul_flops}})
        if p.cost["collectives"] and len(e["devices"]) > 1:
            at = ts + (est.parts["engines"] + est.parts["collectives"] / 2) * 1e6
            for c in p.cost["collectives"]:
                flow_id += 1
                for n, d in enumerate(e["devices"]):
                    phase = "s" if n == 0 else ("f" if n == len(e["devices"]) - 1 else "t")
                    events.append({"name": c["kind"], "cat": "collective", "ph": phase, "id": flow_id, "pid": 0,
                                   "tid": d, "ts": at, "bp": "e", "args": {"bytes": c["bytes"]}})
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms",
                   "otherData": {"estimate": True, "model": MODEL_NAME, "instance_type": target.name}}, f)


# ---------------------------------------------------------------- output


def _seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def _count(n: float) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.2f}{suffix}"
    return f"{n:.0f}"


def format_text(results: list[dict], returncode: int) -> str:
    lines = [f"pjrt-neuron estimate (an estimate, by the {MODEL_NAME}; not a measurement):"]
    if returncode != 0:
        lines.append(f"  the script exited with {returncode}; the estimate covers what ran before that")
    first = results[0]
    lines.append(f"  {first['steps']} step(s) found; {len(first['programs'])} program(s) on "
                 f"{first['cores_used']} NeuronCore(s)")
    lines.append("")
    lines.append("per program (on " + first["instance_type"] + "):")
    lines.append(f"  {'program':<32} {'runs':>5} {'matmul FLOPs':>12} {'vector':>8} {'HBM bytes':>10} "
                 f"{'link bytes':>10} {'time':>10} {'bound':>11} {'of step':>7}")
    names = Counter(p["program"] for p in first["programs"])

    def label(p: dict) -> str:  # programs that share a name (torch-xla's graphs) get their number
        if names[p["program"]] == 1:
            return p["program"][:32]
        suffix = " #" + str(p["program_id"]).rsplit("-", 1)[-1]
        return p["program"][:32 - len(suffix)] + suffix

    for p in first["programs"]:
        lines.append(f"  {label(p):<32} {p['executions']:>5} {_count(sum(p['matmul_flops'].values())):>12} "
                     f"{_count(p['vector_ops'] + p['transcendental_ops']):>8} {_count(p['hbm_bytes']):>10} "
                     f"{_count(p['link_bytes']):>10} {_seconds(p['seconds']):>10} {p['bound']:>11} "
                     f"{p['share_of_step'] * 100:>6.1f}%")
    lines.append("")
    headers = ["", *(r["instance_type"] for r in results)]
    def spread(r: dict, key: str, show) -> str:
        low, high = r["range"].get(key, (None, None))
        return f"{show(low)} - {show(high)}" if low is not None else "-"

    rows = [
        ("copies of the job on the instance", [str(r["deployment"]["copies"]) for r in results]),
        ("step time (one copy)", [_seconds(r["step_seconds"]) for r in results]),
        ("  range", [spread(r, "latency_p50_seconds", _seconds) for r in results]),
        ("latency p50, one request in flight", [_seconds(r["latency_p50_seconds"]) for r in results]),
        ("run time (all executions)", [_seconds(r["run_seconds"]) for r in results]),
        ("model FLOPs utilisation (of BF16 peak)", [f"{r['mfu'] * 100:.2f}%" for r in results]),
        (f"throughput, instance ({first['unit']}/s)", [f"{r['throughput_units_per_second']:.4g}" for r in results]),
        ("  range", [spread(r, "throughput_units_per_second", lambda v: f"{v:.4g}") for r in results]),
        ("price per hour", [f"${r['price_per_hour']:.3f}" if r["price_per_hour"] else "unknown (--price)"
                            for r in results]),
        (f"cost per million {first['unit']}", [f"${r['cost_per_million_units']:.4g}"
                                               if r["cost_per_million_units"] is not None else "-" for r in results]),
        ("  range", [spread(r, "cost_per_million_units", lambda v: f"${v:.4g}") for r in results]),
    ]
    if "baseline_cost_per_million_units" in first:
        rows.append(("baseline cost per million", [f"${r['baseline_cost_per_million_units']:.4g}" for r in results]))
        rows.append(("cost vs baseline", [f"{r['cost_ratio_vs_baseline']:.3g}x" if "cost_ratio_vs_baseline" in r
                                          else "-" for r in results]))
        rows.append(("speed vs baseline", [f"{r['speedup_vs_baseline']:.3g}x" if "speedup_vs_baseline" in r
                                           else "-" for r in results]))
    width = max(len(r[0]) for r in rows)
    col = max(12, *(len(h) for h in headers[1:]), *(len(c) for r in rows for c in r[1]))
    lines.append(f"  {'':<{width}}  " + "  ".join(f"{h:>{col}}" for h in headers[1:]))
    for label, cells in rows:
        lines.append(f"  {label:<{width}}  " + "  ".join(f"{c:>{col}}" for c in cells))
    if any(p["unknown_trip_count"] for p in first["programs"]):
        lines.append("  note: a loop without a known trip count was counted once")
    for r in results:
        lines.append(f"  {r['instance_type']}: {r['deployment']['description']}")
    if first["range"]:
        lines.append(f"  ranges: {first['range']['checked_against']}")
    return "\n".join(lines)


def _parse_prices(items: list[str]) -> dict[str, float]:
    prices = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise EstimateError(f"--price {item!r}: expected INSTANCE=DOLLARS_PER_HOUR, e.g. trn2.48xlarge=45.0")
        try:
            price = float(value)
        except ValueError:
            raise EstimateError(f"--price {item!r}: {value!r} is not a number") from None
        if not price > 0:
            raise EstimateError(f"--price {item!r}: the price must be positive")
        prices[name] = price
    return prices


def _positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise EstimateError(f"{name} must be positive, got {value}")


def main(command: list[str], instances: list[str] | None, unit: str, per_step: float, prices: list[str],
         baseline_price: float | None, baseline_throughput: float | None, auto_cast: str, as_json: bool,
         trace: str | None = None, plot: str | None = None, deployment_mode: str = "copies") -> int:
    from pjrt_neuron import roofline_plot

    try:
        if not command:
            raise EstimateError("give the command to run after --, e.g. `pjrt-neuron estimate -- python train.py`")
        _positive("--per-step", per_step)
        _positive("--baseline-price", baseline_price)
        _positive("--baseline-throughput", baseline_throughput)
        if (baseline_price is None) != (baseline_throughput is None):
            raise EstimateError("--baseline-price and --baseline-throughput go together")
        price_table = _parse_prices(prices)
        if trace and not os.path.isdir(os.path.dirname(os.path.abspath(trace))):
            raise EstimateError(f"--trace {trace}: its directory does not exist")
        if plot:
            if not os.path.isdir(os.path.dirname(os.path.abspath(plot))):
                raise EstimateError(f"--plot {plot}: its directory does not exist")
            try:
                roofline_plot.require_matplotlib()
            except roofline_plot.PlotUnavailable as error:
                raise EstimateError(str(error)) from None
        known = {t["name"] for t in _native.instance_types()}
        for name in [*(instances or []), *price_table]:
            if name not in known:
                raise EstimateError(f"unknown instance type {name!r}; known: {', '.join(sorted(known))}")
        returncode, programs, executions, simulated = run_with_recording(command)
        if not executions:
            print(f"pjrt-neuron estimate: the script ran no programs on the simulated NeuronCores (exit code "
                  f"{returncode}); nothing to estimate", file=sys.stderr)
            return returncode or 2
        names = instances or [simulated["instance_type"]]
        baseline = (baseline_price, baseline_throughput) if baseline_price is not None else None
        results = []
        for name in names:
            lnc = simulated["logical_nc_config"] if name == simulated["instance_type"] else None
            target = make_target(name, price_table, lnc)
            results.append(estimate_for(target, programs, executions, auto_cast, per_step, unit, baseline,
                                        deployment_mode))
            if trace and name == names[0]:
                try:
                    write_trace(trace, target, programs, executions, auto_cast)
                except OSError as error:
                    raise EstimateError(f"--trace {trace}: {error.strerror}") from None
            if plot and name == names[0]:
                try:
                    roofline_plot.write_plot(plot, results[-1], target)
                except OSError as error:
                    raise EstimateError(f"--plot {plot}: {error.strerror}") from None
    except EstimateError as error:
        print(f"pjrt-neuron estimate: {error}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps({"estimate": True, "model": MODEL_NAME, "constants": model.constants_json(),
                          "script_exit_code": returncode,
                          "simulated_instance": simulated, "auto_cast": auto_cast, "instances": results}, indent=2))
    else:
        print(format_text(results, returncode))
    return returncode


# ---------------------------------------------------------------- in the process


REPORT_VARIABLE = "PJRT_NEURON_ESTIMATE_REPORT"


def _start_recording() -> str:
    """The report file this process appends to, turning recording on if it was off."""
    path = os.environ.get(REPORT_VARIABLE)
    if not path:
        fd, path = tempfile.mkstemp(prefix="pjrt-neuron-estimate-", suffix=".jsonl")
        os.close(fd)
        os.environ[REPORT_VARIABLE] = path
    return path


def _now_us() -> int:
    return time.time_ns() // 1000


class Estimate:
    """What `pjrt_neuron.estimate()` hands out: filled in when its block ends."""

    def __init__(self):
        self.instances: list[dict] = []
        self.text = ""

    def __repr__(self) -> str:
        return self.text or "<estimate: the block has not ended>"


def estimate_block(instances=None, unit: str = "steps", per_step: float = 1.0, prices=None,
                   auto_cast: str = "none", baseline=None):
    """A context manager: `with pjrt_neuron.estimate(unit="samples", per_step=256) as e:` ...;
    then `e.instances` (one dict per instance, as `--json` gives) and `print(e)`.

    Programs compiled before the block that run inside it are counted only when recording was
    on from their compilation (PJRT_NEURON_ESTIMATE=1 or PJRT_NEURON_ESTIMATE_REPORT)."""
    price_table = {name: float(price) for name, price in (prices or {}).items()}
    for name, price in price_table.items():
        if not price > 0:
            raise EstimateError(f"price of {name}: must be positive, got {price}")
    _positive("per_step", per_step)

    @contextlib.contextmanager
    def block():
        path = _start_recording()
        result = Estimate()
        since = _now_us()
        yield result
        programs, executions, simulated = read_records(path, since, _now_us())
        if not executions:
            result.text = "pjrt-neuron estimate: no programs ran on the simulated NeuronCores in the block"
            return
        names = instances or [simulated["instance_type"]]
        for name in names:
            lnc = simulated["logical_nc_config"] if name == simulated["instance_type"] else None
            result.instances.append(estimate_for(make_target(name, price_table, lnc), programs, executions,
                                                 auto_cast, per_step, unit, baseline))
        result.text = format_text(result.instances, 0)

    return block()


def report_at_exit() -> None:
    """PJRT_NEURON_ESTIMATE=1: records from now on and prints the estimate to stderr at exit."""
    owned = not os.environ.get(REPORT_VARIABLE)
    path = _start_recording()

    def report():
        try:
            programs, executions, simulated = read_records(path)
            if executions:
                target = make_target(simulated["instance_type"], {}, simulated["logical_nc_config"])
                text = format_text([estimate_for(target, programs, executions, "none", 1.0, "steps", None)], 0)
                print(text.replace("pjrt-neuron estimate (", f"pjrt-neuron estimate, process {os.getpid()} (", 1),
                      file=sys.stderr)
        finally:
            if owned:
                with contextlib.suppress(OSError):
                    os.unlink(path)

    atexit.register(report)
