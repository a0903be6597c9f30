"""`pjrt-neuron plan` under the name tests use; it lives in pjrt_neuron/estimation/plan.py."""

from pjrt_neuron.estimation.plan import (HOURS_PER_MONTH, PlanError, format_plan, main, make_plan, read_report,
                                         serving_cost, training_cost)

__all__ = ["HOURS_PER_MONTH", "PlanError", "format_plan", "main", "make_plan", "read_report", "serving_cost",
           "training_cost"]
