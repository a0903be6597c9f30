"""`pjrt-neuron check -- python script.py ...`: runs a script on simulated NeuronCores with the
Trainium compatibility analysis on, then reports what would fail or change on Trainium."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field


@dataclass
class Finding:
    check: str
    what: str
    why: str
    fix: str
    fails_on_trainium: bool
    source_file: str
    source_line: int
    beyond_int32: bool = False  # int64 values here can leave the int32 range
    op_names: set = field(default_factory=set)
    programs: set = field(default_factory=set)
    instructions: int = 0

    @property
    def location(self) -> str:
        return f"{self.source_file}:{self.source_line}" if self.source_file else "(no source location)"


def run_with_analysis(command: list[str], mode: str) -> tuple[int, list[dict]]:
    """Runs `command` with the analysis reporting to a file; returns its exit code and the records."""
    with tempfile.TemporaryDirectory(prefix="pjrt-neuron-check-") as tmp:
        report = os.path.join(tmp, "findings.jsonl")
        env = dict(os.environ)
        env["PJRT_NEURON_COMPAT"] = mode
        env["PJRT_NEURON_COMPAT_REPORT"] = report
        # torch-xla records source locations in the HLO only when asked.
        env.setdefault("XLA_IR_DEBUG", "1")
        env.setdefault("XLA_HLO_DEBUG", "1")
        returncode = subprocess.call(command, env=env)
        records = []
        if os.path.exists(report):
            with open(report) as f:
                records = [json.loads(line) for line in f if line.strip()]
        return returncode, records


def group(records: list[dict]) -> list[Finding]:
    """One finding per (check, source location), counting programs and instructions."""
    grouped: dict[tuple, Finding] = {}
    for r in records:
        key = (r["check"], r["source_file"], r["source_line"])
        finding = grouped.get(key)
        if finding is None:
            finding = grouped[key] = Finding(r["check"], r["what"], r["why"], r["fix"], r["fails_on_trainium"],
                                             r["source_file"], r["source_line"])
        finding.beyond_int32 |= bool(r.get("beyond_int32", False))
        if r["op_name"]:
            finding.op_names.add(r["op_name"])
        finding.programs.add(r.get("program_id", r["program"]))
        finding.instructions += r["count"]
    return sorted(grouped.values(), key=lambda f: (f.source_file, f.source_line, f.check))


NO_LOCATION_NOTE = (
    "(no source location): the instructions carry no source line. torch-xla records one only with "
    "XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1, which check sets unless they are already set to something else; "
    "otherwise the compiler made them (fusions, copies) from code with no location of its own.")


def format_text(findings: list[Finding]) -> str:
    if not findings:
        return "pjrt-neuron check: no Trainium incompatibilities found."
    failing = sum(f.fails_on_trainium for f in findings)
    lines = [f"pjrt-neuron check: {failing} finding(s) would fail on Trainium, "
             f"{len(findings) - failing} would change the numbers:"]
    for f in findings:
        kind = "FAIL  " if f.fails_on_trainium else "NUMBER"
        ops = f" [{', '.join(sorted(f.op_names))}]" if f.op_names else ""
        beyond = " (values leave the int32 range)" if f.beyond_int32 else ""
        lines.append(f"{kind} {f.location}: {f.what}{beyond}{ops} — in {len(f.programs)} program(s), "
                     f"{f.instructions} instruction(s). {f.why}; {f.fix}.")
    if any(not f.source_file for f in findings):
        lines.append(NO_LOCATION_NOTE)
    return "\n".join(lines)


def format_json(findings: list[Finding], returncode: int) -> str:
    return json.dumps({
        "script_exit_code": returncode,
        "would_fail_on_trainium": any(f.fails_on_trainium for f in findings),
        "findings": [{
            "check": f.check, "what": f.what, "why": f.why, "fix": f.fix,
            "fails_on_trainium": f.fails_on_trainium, "source_file": f.source_file,
            "source_line": f.source_line, "beyond_int32": f.beyond_int32, "op_names": sorted(f.op_names), "programs": len(f.programs),
            "instructions": f.instructions,
        } for f in findings],
    }, indent=2)


def main(command: list[str], as_json: bool, mode: str = "warn") -> int:
    if not command:
        print("pjrt-neuron check: give the command to run after --, e.g. "
              "`pjrt-neuron check -- python train.py`", file=sys.stderr)
        return 2
    returncode, records = run_with_analysis(command, mode)
    findings = group(records)
    print(format_json(findings, returncode) if as_json else format_text(findings))
    if any(f.fails_on_trainium for f in findings):
        return 1
    return returncode
