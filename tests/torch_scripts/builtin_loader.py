"""A small computation through torch-xla's built-in NEURON branch (entry-point plugins off).

Run with XLA_REGISTER_INSTALLED_PLUGINS=0, PJRT_DEVICE=NEURON, NEURON_LIBRARY_PATH and
PJRT_NEURON_ENGINE_LIBRARY set. Prints a JSON object on the last line.
"""

import json

import torch
import torch_xla
import torch_xla.runtime as xr
from torch_xla.experimental import plugins

out = {"registry": sorted(plugins._plugin_registry), "dynamic_plugins": plugins.using_dynamic_plugins()}
device = torch_xla.device()
g = torch.Generator().manual_seed(3)
a = torch.randn(8, 16, generator=g)
b = torch.randn(16, 4, generator=g)
got = torch.relu(a.to(device) @ b.to(device) + 1).cpu()
want = torch.relu(a @ b + 1)
out.update(
    device=str(device),
    device_type=xr.device_type(),
    device_count=xr.global_runtime_device_count(),
    attributes=xr.runtime_device_attributes(str(device)),
    max_abs_err=float((got - want).abs().max()),
    int_sum=int(torch.arange(10, device=device).sum().item()),
)
print(json.dumps(out))
