"""One rank of a torchrun job exercising torch-xla's collective helpers on NEURON.

    PJRT_DEVICE=NEURON torchrun --nproc_per_node=2 torch_collectives.py CHECKPOINT_PATH

Several of these lower to programs that differ per rank (xm.all_gather pads each rank's slice
into place, and xm.rendezvous, xm.mesh_reduce and xm.save are built on it), which the ranks must
still run together. Each rank prints one JSON line with what it got.
"""

import json
import sys

import torch
import torch.distributed as dist
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_backend  # noqa: F401  (registers the "xla" process group)
import torch_xla.runtime as xr


def main(checkpoint_path):
    dist.init_process_group("xla", init_method="xla://")
    rank, world = xr.global_ordinal(), xr.world_size()
    device = torch_xla.device()

    payloads = xm.rendezvous("hello", payload=f"rank {rank}".encode())
    mesh_sum = xm.mesh_reduce("sum", float(rank + 1), sum)
    gathered = xm.all_gather(torch.tensor([[rank * 10.0, rank * 10.0 + 1]], device=device), dim=0)
    reduced = torch.tensor([rank + 1.0, 2.0 * (rank + 1)], device=device)
    dist.all_reduce(reduced)
    broadcast = torch.tensor([rank + 5.0], device=device)
    dist.broadcast(broadcast, src=1)
    scattered = xm.reduce_scatter(xm.REDUCE_SUM, torch.arange(4.0, device=device) * (rank + 1), scale=1.0,
                                  scatter_dim=0, shard_count=world)
    xm.save({"w": torch.full((3,), float(rank), device=device)}, checkpoint_path)  # the master's, after a rendezvous
    xm.rendezvous("saved")
    loaded = torch.load(checkpoint_path)["w"]

    print(json.dumps({
        "rank": rank, "world": world,
        "rendezvous": [p.decode() for p in payloads],
        "mesh_reduce": mesh_sum,
        "all_gather": gathered.cpu().tolist(),
        "all_reduce": reduced.cpu().tolist(),
        "broadcast": broadcast.cpu().tolist(),
        "reduce_scatter": scattered.cpu().tolist(),
        "saved": loaded.tolist(),
    }), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
