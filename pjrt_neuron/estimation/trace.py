"""`pjrt-neuron estimate --trace`: a Chrome / Perfetto trace of one step, at the model's durations."""

from __future__ import annotations

import json

from pjrt_neuron.estimation.model import MODEL_NAME, Target, estimate_program
from pjrt_neuron.estimation.records import Program
from pjrt_neuron.estimation.step import step_window


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
