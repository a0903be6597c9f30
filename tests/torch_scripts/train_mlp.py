"""A few optimizer steps of a small MLP on the XLA device chosen by PJRT_DEVICE.

Prints {"device_type", "registry_neuron", "sgd": [losses], "adam": [losses]} as JSON on the
last line. Run with PJRT_DEVICE=NEURON and PJRT_DEVICE=CPU and compare.
"""

import json

import torch
import torch_xla
import torch_xla.runtime as xr
from torch_xla.experimental import plugins

STEPS = 5


def _batches():
    # Fixed data drawn on the host so both device types see identical inputs.
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(STEPS, 32, 20, generator=g)
    # Labels follow from the inputs, so the loss falls as the model learns.
    y = (x @ torch.randn(20, 5, generator=g)).argmax(dim=-1)
    return x, y


def train(make_optimizer, device):
    # Weights are created on the host with a fixed seed, then moved, so both runs start equal.
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(20, 64), torch.nn.Tanh(), torch.nn.Linear(64, 5)).to(device)
    optimizer = make_optimizer(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    xs, ys = _batches()
    losses = []
    for step in range(STEPS):
        optimizer.zero_grad()
        loss = loss_fn(model(xs[step].to(device)), ys[step].to(device))
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        losses.append(loss.item())
    return losses


def run_training(device):
    return {
        "sgd": train(lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), device),
        "adam": train(lambda p: torch.optim.Adam(p, lr=1e-2), device),
    }


if __name__ == "__main__":
    result = run_training(torch_xla.device())
    result["device_type"] = xr.device_type()
    # Which plugin torch-xla's entry-point registration left in the NEURON slot.
    entry = plugins._plugin_registry.get("NEURON")
    result["registry_neuron"] = None if entry is None else f"{type(entry).__module__}.{type(entry).__qualname__}"
    print(json.dumps(result))
