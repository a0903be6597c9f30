"""torch-xla: torch.nonzero, whose result has a data-dependent (bounded dynamic) shape when
torch-xla runs with XLA_EXPERIMENTAL=nonzero."""

import torch
import torch_xla


def run(device):
    x = torch.tensor([0.0, 1.0, 0.0, 2.0], device=device)
    nonzero = torch.nonzero(x)  # case: torch-nonzero
    torch_xla.sync()
    return {"shape": str(nonzero.shape)}
