"""The instance an estimate is for, read from the plugin's tables: its shape, price and its core
generation's figures."""

from __future__ import annotations

from pjrt_neuron import _native
from pjrt_neuron.estimation import EstimateError
from pjrt_neuron.estimation.model import Target


def known_instance_types() -> set[str]:
    return {t["name"] for t in _native.instance_types()}


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
