"""`pjrt-neuron estimate -- python train.py`: checks the arguments, runs the script with recording
on, and prints the estimate for each instance asked for (text or JSON), a trace and a plot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from pjrt_neuron import roofline_plot
from pjrt_neuron.estimation import EstimateError, require_positive
from pjrt_neuron.estimation.model import MODEL_NAME, constants_json
from pjrt_neuron.estimation.records import REPORT_VARIABLE, Program, read_records
from pjrt_neuron.estimation.report import format_text
from pjrt_neuron.estimation.step import estimate_for
from pjrt_neuron.estimation.targets import known_instance_types, make_target
from pjrt_neuron.estimation.trace import write_trace


def run_with_recording(command: list[str]) -> tuple[int, dict[str, Program], list[dict], dict]:
    with tempfile.TemporaryDirectory(prefix="pjrt-neuron-estimate-") as tmp:
        report = os.path.join(tmp, "estimate.jsonl")
        env = {**os.environ, REPORT_VARIABLE: report}
        try:
            returncode = subprocess.call(command, env=env)
        except OSError as error:
            raise EstimateError(f"could not run {command[0]!r}: {error.strerror}") from None
        return (returncode, *read_records(report))


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


def main(command: list[str], instances: list[str] | None, unit: str, per_step: float, prices: list[str],
         baseline_price: float | None, baseline_throughput: float | None, auto_cast: str, as_json: bool,
         trace: str | None = None, plot: str | None = None, deployment_mode: str = "copies") -> int:
    try:
        if not command:
            raise EstimateError("give the command to run after --, e.g. `pjrt-neuron estimate -- python train.py`")
        require_positive("--per-step", per_step)
        require_positive("--baseline-price", baseline_price)
        require_positive("--baseline-throughput", baseline_throughput)
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
        known = known_instance_types()
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
        print(json.dumps({"estimate": True, "model": MODEL_NAME, "constants": constants_json(),
                          "script_exit_code": returncode,
                          "simulated_instance": simulated, "auto_cast": auto_cast, "instances": results}, indent=2))
    else:
        print(format_text(results, returncode))
    return returncode
