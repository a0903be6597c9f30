"""The estimate's text report: per program on the first instance, then the instances side by side."""

from __future__ import annotations

from collections import Counter

from pjrt_neuron.estimation.model import MODEL_NAME
from pjrt_neuron.tables import Column, format_table

PROGRAM_COLUMNS = [Column("program", "<", 32), Column("runs", ">", 5), Column("matmul FLOPs", ">", 12),
                   Column("vector", ">", 8), Column("HBM bytes", ">", 10), Column("link bytes", ">", 10),
                   Column("time", ">", 10), Column("bound", ">", 11), Column("of step", ">", 7)]


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


def _program_rows(programs: list[dict]) -> list[list[str]]:
    names = Counter(p["program"] for p in programs)

    def label(p: dict) -> str:  # programs that share a name (torch-xla's graphs) get their number
        if names[p["program"]] == 1:
            return p["program"][:32]
        suffix = " #" + str(p["program_id"]).rsplit("-", 1)[-1]
        return p["program"][:32 - len(suffix)] + suffix

    return [[label(p), str(p["executions"]), _count(sum(p["matmul_flops"].values())),
             _count(p["vector_ops"] + p["transcendental_ops"]), _count(p["hbm_bytes"]), _count(p["link_bytes"]),
             _seconds(p["seconds"]), p["bound"], f"{p['share_of_step'] * 100:.1f}%"] for p in programs]


def _instance_rows(results: list[dict]) -> list[list[str]]:
    first = results[0]

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
    return [[label, *cells] for label, cells in rows]


def format_text(results: list[dict], returncode: int) -> str:
    first = results[0]
    lines = [f"pjrt-neuron estimate (an estimate, by the {MODEL_NAME}; not a measurement):"]
    if returncode != 0:
        lines.append(f"  the script exited with {returncode}; the estimate covers what ran before that")
    lines.append(f"  {first['steps']} step(s) found; {len(first['programs'])} program(s) on "
                 f"{first['cores_used']} NeuronCore(s)")
    lines.append("")
    lines.append("per program (on " + first["instance_type"] + "):")
    lines += format_table(PROGRAM_COLUMNS, _program_rows(first["programs"]), indent="  ")
    lines.append("")
    columns = [Column(), *(Column(r["instance_type"], ">", 12) for r in results)]
    lines += format_table(columns, _instance_rows(results), indent="  ", gap="  ")
    if any(p["unknown_trip_count"] for p in first["programs"]):
        lines.append("  note: a loop without a known trip count was counted once")
    for r in results:
        lines.append(f"  {r['instance_type']}: {r['deployment']['description']}")
    if first["range"]:
        lines.append(f"  ranges: {first['range']['checked_against']}")
    return "\n".join(lines)
