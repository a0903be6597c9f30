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
    args = parser.parse_args()
    dist.init_process_group()  # neuron tensors: the neuron backend; CPU tensors: gloo
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ["LOCAL_RANK"])
    device = torch.device(args.device, local) if args.device == "neuron" else torch.device("cpu")
    share = GLOBAL_BATCH // world

    def train(compiled: bool):
        net = model().to(device)
        ddp = nn.parallel.DistributedDataParallel(net)  # a one-device module: device_ids stays None
        step_model = torch.compile(ddp, backend="neuron" if args.device == "neuron" else "eager") if compiled else ddp
        opt = torch.optim.SGD(ddp.parameters(), lr=LR)
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
        return net, losses

    net, losses = train(compiled=False)
    result = {"rank": rank, "world": world, "device": str(device), "losses": losses, "weights": weights(net)}
    if args.compiled:
        compiled_net, compiled_losses = train(compiled=True)
        result["compiled"] = {"losses": compiled_losses, "weights": weights(compiled_net)}
    report(result)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
