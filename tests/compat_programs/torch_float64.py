"""torch-xla: a float64 tensor on the device (torch-xla itself makes it float32 on NEURON)."""

import torch
import torch_xla


def run(device):
    ones = torch.ones(4, dtype=torch.float64, device=device)  # case: torch-float64-ones
    scaled = ones * 2.5  # case: torch-float64-multiply
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([scaled])
    torch_xla.sync()
    return {"dtype": str(scaled.dtype), "values": scaled.cpu().tolist(),
            "hlo_has_f64": "f64[" in hlo, "hlo_has_f32": "f32[" in hlo}
