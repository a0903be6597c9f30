"""The estimate inside a process: `with pjrt_neuron.estimate(...)` over a block, and
PJRT_NEURON_ESTIMATE=1's report to stderr at exit."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys

from pjrt_neuron.estimation import EstimateError, require_positive
from pjrt_neuron.estimation.records import REPORT_VARIABLE, now_us, read_records, start_recording
from pjrt_neuron.estimation.report import format_text
from pjrt_neuron.estimation.step import estimate_for
from pjrt_neuron.estimation.targets import make_target


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
    require_positive("per_step", per_step)

    @contextlib.contextmanager
    def block():
        path = start_recording()
        result = Estimate()
        since = now_us()
        yield result
        programs, executions, simulated = read_records(path, since, now_us())
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
    path = start_recording()

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
