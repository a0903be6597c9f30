"""torch-xla SPMD: a few SGD steps of a tiny MLP with sharded inputs and weights.

    python torch_spmd.py spmd        # xr.use_spmd(); mesh over every device of PJRT_DEVICE
    python torch_spmd.py reference   # the same steps unsharded on one device (PJRT_DEVICE=CPU)

Prints one JSON object on the last line: {"mode", "device_type", "device_count", "runs": {name:
{"losses", "fc1_weight", "fc2_weight", "specs", "shard_devices", ...}}}. The "spmd" runs:

- data_parallel:  1D mesh ("data",); the batch and its labels split over "data";
- model_parallel: 2D mesh ("data", "model") = (n/2, 2); the batch over "data", fc1's output
  features and bias and fc2's input features over "model" (Megatron-style);
- weight_sharded: 1D mesh; fc1's weight split over its input features across every device,
  the batch over "data" too.

Every run starts from the same weights and data, so all must match the reference.
"""

import json
import sys

import numpy as np
import torch
import torch_xla
import torch_xla.runtime as xr

STEPS = 4
BATCH, D_IN, HIDDEN, D_OUT = 64, 32, 64, 4


def data():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(STEPS, BATCH, D_IN, generator=g)
    y = (x @ torch.randn(D_IN, D_OUT, generator=g)).argmax(dim=-1)  # learnable labels
    return x, y


def make_model(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(D_IN, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, D_OUT)).to(device)


def train(device, shard_model=None, shard_batch=None):
    model = make_model(device)
    if shard_model is not None:
        shard_model(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xs, ys = data()
    losses = []
    for step in range(STEPS):
        x, y = xs[step].to(device), ys[step].to(device)
        if shard_batch is not None:
            shard_batch(x, y)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        losses.append(loss.item())
    return model, losses


def weights(model):
    return {"fc1_weight": model[0].weight.detach().cpu().flatten().tolist(),
            "fc2_weight": model[2].weight.detach().cpu().flatten().tolist()}


def reference():
    model, losses = train(torch_xla.device())
    return {"reference": {"losses": losses, **weights(model)}}


def spmd():
    import torch_xla.distributed.spmd as xs

    n = xr.global_runtime_device_count()
    device = torch_xla.device()
    mesh_1d = xs.Mesh(np.arange(n), (n,), ("data",))
    mesh_2d = xs.Mesh(np.arange(n), (n // 2, 2), ("data", "model"))

    def batch_over_data(mesh):
        def shard(x, y):
            xs.mark_sharding(x, mesh, ("data", None))
            xs.mark_sharding(y, mesh, ("data",))
        return shard

    def megatron(model):
        xs.mark_sharding(model[0].weight, mesh_2d, ("model", None))
        xs.mark_sharding(model[0].bias, mesh_2d, ("model",))
        xs.mark_sharding(model[2].weight, mesh_2d, (None, "model"))

    def fc1_over_all(model):
        xs.mark_sharding(model[0].weight, mesh_1d, (None, "data"))

    configs = {
        "data_parallel": (None, batch_over_data(mesh_1d)),
        "model_parallel": (megatron, batch_over_data(mesh_2d)),
        "weight_sharded": (fc1_over_all, batch_over_data(mesh_1d)),
    }
    runs = {}
    for name, (shard_model, shard_batch) in configs.items():
        model, losses = train(device, shard_model, shard_batch)
        fc1 = model[0].weight
        run = {"losses": losses, **weights(model)}
        # After the optimizer steps the parameters must still carry their sharding...
        run["specs"] = {"fc1_weight": torch_xla._XLAC._get_xla_sharding_spec(fc1),
                        "fc2_weight": torch_xla._XLAC._get_xla_sharding_spec(model[2].weight)}
        # ...and their shards must live on the NeuronCores the mesh names.
        if shard_model is not None:
            sharded = xs.mark_sharding(fc1, *(
                (mesh_2d, ("model", None)) if name == "model_parallel" else (mesh_1d, (None, "data"))))
            run["shard_devices"] = sorted({s.shard_device for s in sharded.local_shards})
            run["shard_shapes"] = sorted({tuple(s.data.shape) for s in sharded.local_shards})
        runs[name] = run
    return runs


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "spmd":
        xr.use_spmd()
    runs = spmd() if mode == "spmd" else reference()
    print(json.dumps({
        "mode": mode, "device_type": xr.device_type(), "device_count": xr.global_runtime_device_count(),
        "addressable_device_count": xr.addressable_runtime_device_count(),
        "is_spmd": xr.is_spmd(), "runs": runs,
    }))
