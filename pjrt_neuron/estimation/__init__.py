"""The Trainium estimate: `pjrt-neuron estimate`, `pjrt_neuron.estimate()`, PJRT_NEURON_ESTIMATE=1.

A script (or a block, or a process) runs on simulated NeuronCores; the plugin records every
program it compiles (its work counts, read from the HLO) and every execution (which cores), and
this package estimates the time a step would take on Trainium and what a million units would cost.

    model     how a NeuronCore spends time on one program, and the model's constants
    records   the plugin's records of a run: programs and executions
    targets   the instance to estimate for, from the plugin's tables
    step      from per-program estimates to a step, the instance's throughput and its cost
    trace     a Chrome / Perfetto trace of one step
    report    the text report
    plan      `pjrt-neuron plan`: a month of training and serving from two reports
    command   `pjrt-neuron estimate`'s checks and run
    hook      in a process: the `with` block and the at-exit report

Named `estimation` and not `estimate`: the package's attribute `pjrt_neuron.estimate` is the
function that opens a block, and a subpackage of that name would replace it on import.
"""


class EstimateError(Exception):
    """Bad arguments or nothing to estimate: the message says which and why."""


def require_positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise EstimateError(f"{name} must be positive, got {value}")
