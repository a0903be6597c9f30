"""The plugin's records of a run (PJRT_NEURON_ESTIMATE_REPORT, JSON lines): each program it
compiled, with its work counts, and each execution, with the cores it ran on."""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field

REPORT_VARIABLE = "PJRT_NEURON_ESTIMATE_REPORT"


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


def start_recording() -> str:
    """The report file this process appends to, turning recording on if it was off."""
    path = os.environ.get(REPORT_VARIABLE)
    if not path:
        fd, path = tempfile.mkstemp(prefix="pjrt-neuron-estimate-", suffix=".jsonl")
        os.close(fd)
        os.environ[REPORT_VARIABLE] = path
    return path


def now_us() -> int:
    """The clock the plugin stamps executions with."""
    return time.time_ns() // 1000
