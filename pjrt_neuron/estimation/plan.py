"""`pjrt-neuron plan`: what training and serving would cost a month on each instance type, from
two `pjrt-neuron estimate --json` reports (the user's own training and serving scripts) and a
workload, beside what the user pays today.

Training is paid by the instance-hour it takes (units a month over the instance's throughput);
serving by the whole month of the instances that carry the busiest hour's rate, each meeting the
latency bound with one request in flight, or none where no instance count can.
"""

from __future__ import annotations

import json
import math
import sys

from pjrt_neuron.tables import Column, format_table

HOURS_PER_MONTH = 730.0  # 365 x 24 / 12


class PlanError(Exception):
    """Bad arguments or reports: the message says which and what to do."""


def read_report(path: str, role: str) -> dict[str, dict]:
    """The report's estimates by instance type."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as error:
        raise PlanError(f"--{role} {path}: {error.strerror}") from None
    start = text.find("{")
    try:
        report = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        report = None
    if not isinstance(report, dict) or not report.get("estimate") or "instances" not in report:
        raise PlanError(f"--{role} {path}: not a report of `pjrt-neuron estimate --json`; make one with "
                        f"`pjrt-neuron estimate --json --instance TYPE ... -- python script.py > {path}`")
    return {r["instance_type"]: r for r in report["instances"]}


def _range(estimate: dict, value: float, key: str = "throughput_units_per_second") -> tuple[float, float]:
    """`value`, computed from the throughput, at the throughput's low and high."""
    low, high = estimate.get("range", {}).get(key, (None, None))
    throughput = estimate[key]
    if low is None or not throughput:
        return value, value
    return value * throughput / high, value * throughput / low


def training_cost(estimate: dict, units_per_month: float) -> dict:
    price, throughput = estimate["price_per_hour"], estimate["throughput_units_per_second"]
    hours = units_per_month / throughput / 3600 if throughput else math.inf
    cost = hours * price if price else None
    low, high = _range(estimate, cost) if cost is not None else (None, None)
    return {"instance_hours": hours, "monthly_cost": cost, "monthly_cost_range": [low, high]}


def serving_cost(estimate: dict, units_per_day: float, peak_to_average: float,
                 latency_bound_seconds: float | None) -> dict:
    price, throughput = estimate["price_per_hour"], estimate["throughput_units_per_second"]
    latency = estimate["latency_p50_seconds"]
    if latency_bound_seconds is not None and latency > latency_bound_seconds:
        return {"instances": None, "monthly_cost": None, "monthly_cost_range": [None, None],
                "latency_p50_seconds": latency,
                "why": f"p50 latency {latency * 1e3:.3g} ms exceeds the bound {latency_bound_seconds * 1e3:.3g} ms"}
    rate = units_per_day / 86400 * peak_to_average
    needed = max(1, math.ceil(rate / throughput)) if throughput else None
    cost = needed * price * HOURS_PER_MONTH if (needed and price) else None
    bounds = [None, None]
    if cost is not None:
        low, high = estimate.get("range", {}).get("throughput_units_per_second", (throughput, throughput))
        bounds = [max(1, math.ceil(rate / high)) * price * HOURS_PER_MONTH,
                  max(1, math.ceil(rate / low)) * price * HOURS_PER_MONTH]
    return {"instances": needed, "monthly_cost": cost, "monthly_cost_range": bounds, "latency_p50_seconds": latency}


def make_plan(training: dict[str, dict] | None, serving: dict[str, dict] | None, training_units_per_month: float,
              serving_units_per_day: float, peak_to_average: float, latency_bound_seconds: float | None,
              current_monthly_cost: float | None) -> dict:
    if not training and not serving:
        raise PlanError("give --training REPORT.json, --serving REPORT.json or both")
    for name, value in (("--training-units-per-month", training_units_per_month),
                        ("--serving-units-per-day", serving_units_per_day)):
        if value < 0:
            raise PlanError(f"{name} must not be negative, got {value}")
    if peak_to_average < 1:
        raise PlanError(f"--peak-to-average must be at least 1, got {peak_to_average}")
    if latency_bound_seconds is not None and latency_bound_seconds <= 0:
        raise PlanError("--latency-bound-ms must be positive")
    rows = []
    for name in sorted(set(training or {}) | set(serving or {})):
        row = {"instance_type": name, "training": None, "serving": None}
        if training and name in training:
            row["training"] = training_cost(training[name], training_units_per_month)
        if serving and name in serving:
            row["serving"] = serving_cost(serving[name], serving_units_per_day, peak_to_average, latency_bound_seconds)
        parts = [p for p in (row["training"], row["serving"]) if p is not None]
        costs = [p["monthly_cost"] for p in parts]
        row["monthly_cost"] = sum(costs) if costs and None not in costs else None
        rows.append(row)
    plan = {"rows": rows, "current_monthly_cost": current_monthly_cost, "cheapest": None}
    train_options = [(r["training"]["monthly_cost"], r["instance_type"]) for r in rows
                     if r["training"] and r["training"]["monthly_cost"] is not None]
    serve_options = [(r["serving"]["monthly_cost"], r["instance_type"]) for r in rows
                     if r["serving"] and r["serving"]["monthly_cost"] is not None]
    if (train_options or not training) and (serve_options or not serving):
        best_train = min(train_options, default=(0.0, None))
        best_serve = min(serve_options, default=(0.0, None))
        plan["cheapest"] = {"training_on": best_train[1], "serving_on": best_serve[1],
                            "monthly_cost": best_train[0] + best_serve[0]}
    return plan


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.0f}"


PLAN_COLUMNS = [Column("instance", "<", 16), Column("training", ">", 12), Column("(range)", ">", 21),
                Column("serving", ">", 12), Column("instances", ">", 9), Column("p50 latency", ">", 11),
                Column("total", ">", 12)]


def _plan_row(r: dict) -> list[str]:
    t, s = r["training"] or {}, r["serving"] or {}
    low, high = t.get("monthly_cost_range", [None, None])
    span = f"{_money(low)} - {_money(high)}" if low is not None else "-"
    latency = f"{s['latency_p50_seconds'] * 1e3:.3g} ms" if s else "-"
    count = str(s["instances"]) if s.get("instances") else ("none" if s else "-")
    return [r["instance_type"], _money(t.get("monthly_cost")), span, _money(s.get("monthly_cost")), count, latency,
            _money(r["monthly_cost"])]


def format_plan(plan: dict) -> str:
    lines = ["pjrt-neuron plan (from estimates, not measurements): monthly cost per instance type",
             *format_table(PLAN_COLUMNS, [_plan_row(r) for r in plan["rows"]], indent="  ")]
    lines += [f"    serving on {r['instance_type']}: {r['serving']['why']}" for r in plan["rows"]
              if (r["serving"] or {}).get("why")]
    best = plan["cheapest"]
    if best:
        where = ", ".join(f"{role} on {name}" for role, name in (("training", best["training_on"]),
                                                                 ("serving", best["serving_on"])) if name)
        lines.append(f"  cheapest: {where}: {_money(best['monthly_cost'])} a month")
        if plan["current_monthly_cost"]:
            lines.append(f"  today: {_money(plan['current_monthly_cost'])} a month "
                         f"({best['monthly_cost'] / plan['current_monthly_cost']:.2f}x of it)")
    else:
        lines.append("  no instance type meets the workload (see the reasons above, or give --price)")
    return "\n".join(lines)


def main(args) -> int:
    try:
        training = read_report(args.training, "training") if args.training else None
        serving = read_report(args.serving, "serving") if args.serving else None
        bound = args.latency_bound_ms / 1e3 if args.latency_bound_ms is not None else None
        plan = make_plan(training, serving, args.training_units_per_month, args.serving_units_per_day,
                         args.peak_to_average, bound, args.current_monthly_cost)
    except PlanError as error:
        print(f"pjrt-neuron plan: {error}", file=sys.stderr)
        return 2
    print(json.dumps(plan, indent=2) if args.json else format_plan(plan))
    return 0
