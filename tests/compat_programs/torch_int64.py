"""torch-xla: int64 (torch's default integer type) arithmetic on the device."""

import torch
import torch_xla


def run(device):
    steps = torch.arange(10, device=device)  # case: torch-arange
    scaled = steps * 3 + 1  # case: torch-long-arithmetic
    torch_xla.sync()
    return {"dtype": str(scaled.dtype), "values": scaled.cpu().tolist()}
