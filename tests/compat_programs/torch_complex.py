"""torch-xla: complex64 arithmetic on the device."""

import torch
import torch_xla


def run(device):
    ones = torch.ones(4, dtype=torch.complex64, device=device)  # case: torch-complex-ones
    rotated = ones * (1 + 2j)  # case: torch-complex-multiply
    torch_xla.sync()
    values = rotated.cpu()
    return {"dtype": str(rotated.dtype), "real": values.real.tolist(), "imag": values.imag.tolist()}
