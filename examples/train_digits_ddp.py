"""Train the digits MLP data-parallel over several processes with torch-xla.

The data-parallel version of train_digits_torch.py: same data, model and
optimizer, with each global batch of --batch-size split evenly across the
processes. It is an ordinary torch-xla DDP script; the launcher decides how
many processes there are:

    PJRT_DEVICE=NEURON torchrun --nproc_per_node=2 examples/train_digits_ddp.py
    PJRT_DEVICE=NEURON NEURONCORE_NUM_DEVICES=2 python examples/train_digits_ddp.py --spawn
    PJRT_DEVICE=NEURON python examples/train_digits_ddp.py     # one process

(xmp.spawn starts NEURONCORE_NUM_DEVICES processes for NEURON, one if unset.)

Rank 0 prints the mean training loss per epoch, the final test accuracy and a
last JSON line with the results of every rank; every rank prints
"rank R weights sha256 <hex>". Exits with status 1 if the accuracy is below
0.95 or the ranks end with different weights.
"""

import argparse
import hashlib
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_backend  # noqa: F401  (registers the "xla" backend)
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr
from torch.nn.parallel import DistributedDataParallel

from train_digits_torch import ACCURACY_THRESHOLD, load_data


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64,
                        help="global batch, split evenly across the processes")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=128, help="width of the hidden layer")
    parser.add_argument("--spawn", action="store_true",
                        help="start the processes with torch_xla's xmp.spawn")
    return parser.parse_args(argv)


def join_process_group(spawned):
    """Joins the "xla" process group if a launcher started us; returns (rank, world_size)."""
    launched_by_torchrun = dist.is_torchelastic_launched()
    # Without a launcher there is nobody to join, and xla:// would still open a TCP store.
    if spawned or launched_by_torchrun:
        dist.init_process_group("xla", init_method="xla://")
    world_size = xr.world_size()
    if world_size > 1 and xr.addressable_device_count() > 1:
        # xmp.spawn then runs one thread per device, and threads share one process group.
        raise SystemExit(
            f"{xr.addressable_device_count()} {xr.device_type()} devices in one process: "
            "DDP needs one device per process")
    if launched_by_torchrun and world_size != int(os.environ["WORLD_SIZE"]):
        # Each process would otherwise train alone on all of the data and say nothing.
        raise SystemExit(
            f"torchrun started WORLD_SIZE={os.environ['WORLD_SIZE']} processes but "
            f"{xr.device_type()} devices form a world of {world_size}: this PJRT device "
            "does not connect processes")
    return xr.global_ordinal(), world_size


def build_model(hidden):
    return torch.nn.Sequential(
        torch.nn.Linear(64, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, 10),
    )


def weights_fingerprint(model):
    """sha256 of all parameters as float32 bytes, and their sum in float64."""
    digest = hashlib.sha256()
    total = 0.0
    for param in model.parameters():
        values = param.detach().cpu().numpy().astype(np.float32)
        digest.update(values.tobytes())
        total += float(values.astype(np.float64).sum())
    return digest.hexdigest(), total


def gather_fingerprints(sha256_hex, weight_sum, world_size, device):
    """Every rank's (sha256, sum); each byte travels as an int32 through xm.all_gather."""
    payload = bytes.fromhex(sha256_hex) + struct.pack("<d", weight_sum)
    if world_size == 1:
        return [(sha256_hex, weight_sum)]
    local = torch.tensor(list(payload), dtype=torch.int32, device=device)
    gathered = xm.all_gather(local, dim=0, pin_layout=False).cpu().numpy()
    rows = gathered.astype(np.uint8).reshape(world_size, len(payload))
    return [(row[:32].tobytes().hex(), struct.unpack("<d", row[32:].tobytes())[0])
            for row in rows]


def train_epoch(model, optimizer, loss_fn, batches, device):
    """One pass over this rank's batches; returns the summed loss, still on the device."""
    model.train()
    # Accumulate on the device; a single .item() per epoch avoids forcing
    # a host sync after every step.
    loss_sum = torch.zeros((), device=device)
    for xb, yb in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(xb.to(device)), yb.to(device))
        loss.backward()
        optimizer.step()
        loss_sum += loss.detach()
        torch_xla.sync()
    return loss_sum


def train(args, spawned):
    start = time.perf_counter()
    torch.manual_seed(args.seed)
    # The same seed on every rank gives every rank the same permutation to split.
    rng = np.random.default_rng(args.seed)

    rank, world_size = join_process_group(spawned)
    device = torch_xla.device()
    is_main = rank == 0
    local_batch = args.batch_size // world_size
    if is_main:
        print(f"device: {device} ({xr.device_type()})", flush=True)
        print(f"world size: {world_size}  batch per rank: {local_batch}", flush=True)

    x_train, y_train, x_test, y_test = load_data(args.seed)
    global_batch = local_batch * world_size
    # Drop the last incomplete global batch so every rank runs the same number
    # of steps with the same shape, and XLA compiles the step once.
    steps_per_epoch = len(x_train) // global_batch if global_batch else 0
    if steps_per_epoch == 0:
        print("batch size is larger than the training set or smaller than the world size",
              file=sys.stderr)
        return 2

    model = build_model(args.hidden).to(device)
    # DDP over the "xla" backend averages the gradients inside backward().
    # gradient_as_bucket_view stays off: with it, torch-xla 2.9 leaves some
    # gradients unreduced and the ranks drift apart (pytorch/xla#8841).
    parallel_model = DistributedDataParallel(model) if world_size > 1 else model
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()

    x_train_t = torch.from_numpy(x_train)
    y_train_t = torch.from_numpy(y_train)

    losses = []
    epoch_ends = []  # after each epoch's loss reached the host: every step before it has run
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_train))[:steps_per_epoch * global_batch]
        # Rank r takes the r-th slice of each global batch: disjoint across ranks.
        order = order.reshape(steps_per_epoch, world_size, local_batch)[:, rank]
        batches = ((x_train_t[idx], y_train_t[idx]) for idx in torch.from_numpy(order))
        loss_sum = train_epoch(parallel_model, optimizer, loss_fn, batches, device)
        if world_size > 1:
            # Equal shards, so the mean of the ranks' losses is the global batch's loss.
            # Unpinned like DDP's all-reduces, which it shares a graph with through
            # the collective token; XLA rejects a mix of pinned and unpinned.
            loss_sum = xm.all_reduce(xm.REDUCE_SUM, loss_sum, scale=1.0 / world_size,
                                     pin_layout=False)
        mean_loss = loss_sum.item() / steps_per_epoch
        epoch_ends.append(time.perf_counter())
        losses.append(mean_loss)
        if is_main:
            print(f"epoch {epoch}/{args.epochs}  loss {mean_loss:.4f}", flush=True)

    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(x_test).to(device))
        predictions = logits.argmax(dim=1).cpu().numpy()
    accuracy = float((predictions == y_test).mean())

    sha256_hex, weight_sum = weights_fingerprint(model)
    print(f"rank {rank} weights sha256 {sha256_hex}", flush=True)
    fingerprints = gather_fingerprints(sha256_hex, weight_sum, world_size, device)
    ranks_agree = len({sha for sha, _ in fingerprints}) == 1
    if is_main:
        print(f"elapsed: {time.perf_counter() - start:.1f} s")
        print(f"test accuracy: {accuracy:.4f}")
        if not ranks_agree:
            print("the ranks ended with different weights", file=sys.stderr)
        print(json.dumps({
            "world_size": world_size,
            "test_accuracy": accuracy,
            "weight_sha256_per_rank": [sha for sha, _ in fingerprints],
            "weight_sum_per_rank": [total for _, total in fingerprints],
            "losses": losses,
            "steps_per_epoch": steps_per_epoch,
            # Epoch 1 includes compilation; later epochs are the steady state.
            "seconds_per_step": ((epoch_ends[-1] - epoch_ends[0]) / (steps_per_epoch * (len(epoch_ends) - 1))
                                 if len(epoch_ends) > 1 else None),
        }), flush=True)
    return 0 if accuracy >= ACCURACY_THRESHOLD and ranks_agree else 1


def _mp_fn(index, args):
    status = train(args, spawned=True)
    # xmp.spawn drops return values; SystemExit reaches the parent through the process pool.
    if status:
        sys.exit(status)


def main(argv=None):
    args = parse_args(argv)
    if args.spawn:
        xmp.spawn(_mp_fn, args=(args,))
        return 0
    return train(args, spawned=False)


if __name__ == "__main__":
    sys.exit(main())
