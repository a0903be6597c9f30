"""One rank of a DistributedDataParallel job on the native `neuron` device (or the CPU with gloo).

    torchrun --nproc_per_node=2 native_ddp.py --device neuron --steps 8 [--compiled]

A small MLP on scikit-learn's digits: every step takes the next global batch, rank r its r-th
share. Each rank prints one JSON line: the global loss of each step (the ranks' losses averaged
with all_reduce), and its final weights; with --compiled, the same again for a fresh model run
through torch.compile(DistributedDataParallel(model)) (backend "neuron"). `reference()` is the same training in one CPU process on
the whole global batch, which DDP's averaged gradients must reproduce.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the test also loads this file by path
from native_report import report  # noqa: E402

GLOBAL_BATCH = 64
LR = 0.1


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def batches(steps: int):
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    for step in range(steps):
        start = step * GLOBAL_BATCH
        yield x[start:start + GLOBAL_BATCH], y[start:start + GLOBAL_BATCH]


def weights(net: nn.Module) -> dict:
    return {name: p.detach().cpu().flatten().tolist() for name, p in net.named_parameters()}


def reference(steps: int) -> dict:
    """The same training in one process on the CPU, each step on the whole global batch."""
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    losses = []
    for x, y in batches(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "weights": weights(net)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="neuron")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--compiled", action="store_true", help="then the same with torch.compile(ddp_model)")
    parser.add_argument("--device-ids", action="store_true",
                        help="then the same with DistributedDataParallel(model, device_ids=[LOCAL_RANK])")
    parser.add_argument("--fsdp", action="store_true", help="then the same with FSDP2 (fully_shard) instead of DDP")
    args = parser.parse_args()
    dist.init_process_group()  # neuron tensors: the neuron backend; CPU tensors: gloo
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ["LOCAL_RANK"])
    device = torch.device(args.device, local) if args.device == "neuron" else torch.device("cpu")
    if args.device == "neuron":
        torch.neuron.set_device(local)  # as torch.cuda.set_device(LOCAL_RANK) in a CUDA script
    share = GLOBAL_BATCH // world

    def wrap(net: nn.Module, kind: str) -> nn.Module:
        if kind == "fsdp":
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            mesh = init_device_mesh(device.type, (world,))
            for layer in net:
                if isinstance(layer, nn.Linear):
                    fully_shard(layer, mesh=mesh)
            return fully_shard(net, mesh=mesh)  # the module stays on the CPU: fully_shard moves it
        net = net.to(device)
        if kind == "device_ids":
            return nn.parallel.DistributedDataParallel(net, device_ids=[local])
        return nn.parallel.DistributedDataParallel(net)  # a one-device module: device_ids stays None

    def train(kind: str):
        net = model()
        wrapped = wrap(net, kind)
        step_model = wrapped
        if kind == "compiled":
            step_model = torch.compile(wrapped, backend="neuron" if args.device == "neuron" else "eager")
        opt = torch.optim.SGD(wrapped.parameters(), lr=LR)
        losses = []
        for x, y in batches(args.steps):
            x, y = x[rank * share:(rank + 1) * share].to(device), y[rank * share:(rank + 1) * share].to(device)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(step_model(x), y)
            loss.backward()
            opt.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean, op=dist.ReduceOp.AVG)
            losses.append(mean.item())
        if kind == "fsdp":  # each rank holds a shard: the whole parameters gathered for the report
            full = {name: p.full_tensor().detach().cpu().flatten().tolist() for name, p in net.named_parameters()}
            shards = [str(p.to_local().device) for p in net.parameters()]
            return {"losses": losses, "weights": full, "shard_devices": sorted(set(shards)),
                    "placements": sorted({str(p.placements) for p in net.parameters()})}
        return {"losses": losses, "weights": weights(net)}

    result = {"rank": rank, "world": world, "device": str(device), **train("eager")}
    for kind in ("compiled", "device_ids", "fsdp"):
        if getattr(args, kind):
            result[kind] = train(kind)
    report(result)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
