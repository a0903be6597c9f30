"""torch-xla's own persistent compilation cache on the device chosen by PJRT_DEVICE.

Usage: python torch_persistent_cache.py CACHE_DIR
Initialises torch-xla's cache in CACHE_DIR before any computation, runs a few SGD steps of a
small model on the XLA device and the same steps eagerly on the host CPU as reference, and
prints one JSON line: both loss lists, the final weights' largest difference, the files in
CACHE_DIR and the plugin's compile counters for this process.
"""

import json
import os
import sys

import torch
import torch_xla
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr

cache_dir = sys.argv[1]
xr.initialize_cache(cache_dir, readonly=False)

STEPS = 3


def train(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(STEPS, 8, 16, generator=g)
    y = torch.randint(0, 4, (STEPS, 8), generator=g)
    losses = []
    for step in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[step].to(device)), y[step].to(device))
        loss.backward()
        optimizer.step()
        if device != "cpu":
            torch_xla.sync()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


xla_losses, xla_params = train(torch_xla.device())
cpu_losses, cpu_params = train("cpu")

result = {
    "device_type": xr.device_type(),
    "xla_losses": xla_losses,
    "cpu_losses": cpu_losses,
    "max_param_diff": max(float((a - b).abs().max()) for a, b in zip(xla_params, cpu_params)),
    "cache_files": sorted(os.listdir(cache_dir)),
    # torch-xla's own counters: PersistentCacheHit, PersistentCacheMiss, PersistentCacheDeserializeFailure...
    "torch_xla_counters": {name: met.counter_value(name) for name in met.counter_names() if "Persistent" in name},
}
if xr.device_type() == "NEURON":
    from pjrt_neuron import cache

    result["plugin_metrics"] = cache.metrics()
print(json.dumps(result))
