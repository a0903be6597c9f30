"""The estimate's model under the name the calibration benchmark and tests use; it lives in
pjrt_neuron/estimation/model.py (CONSTANTS is the same dict: changing it here changes the model)."""

from pjrt_neuron.estimation.model import (CONSTANTS, Constant, constant, constants_json, matmul_cycles,
                                          matmul_efficiency, serialised, spilled_bytes)

__all__ = ["CONSTANTS", "Constant", "constant", "constants_json", "matmul_cycles", "matmul_efficiency",
           "serialised", "spilled_bytes"]
