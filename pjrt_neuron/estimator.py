"""The estimate's public names, where scripts, tests and benchmarks import them from; the code is
in pjrt_neuron/estimation/ (model, records, targets, step, trace, report, command, hook)."""

from pjrt_neuron.estimation import EstimateError
from pjrt_neuron.estimation.command import main, run_with_recording
from pjrt_neuron.estimation.hook import Estimate, estimate_block, report_at_exit
from pjrt_neuron.estimation.model import (MODEL_NAME, ProgramEstimate, Target, collective_seconds, estimate_program,
                                          tensor_engine_seconds)
from pjrt_neuron.estimation.records import REPORT_VARIABLE, Program, read_records
from pjrt_neuron.estimation.report import format_text
from pjrt_neuron.estimation.step import (DEPLOYMENTS, calibration_range, cost_per_million, deployment, estimate_for,
                                         step_window)
from pjrt_neuron.estimation.targets import make_target
from pjrt_neuron.estimation.trace import write_trace

__all__ = ["DEPLOYMENTS", "MODEL_NAME", "REPORT_VARIABLE", "Estimate", "EstimateError", "Program", "ProgramEstimate",
           "Target", "calibration_range", "collective_seconds", "cost_per_million", "deployment", "estimate_block",
           "estimate_for", "estimate_program", "format_text", "main", "make_target", "read_records",
           "report_at_exit", "run_with_recording", "step_window", "tensor_engine_seconds", "write_trace"]
