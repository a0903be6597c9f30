"""One rank of a torchrun job: each torch.distributed collective on `neuron` tensors (the neuron
backend) and on the same CPU tensors (gloo, which `init_process_group()` keeps for the CPU).

    torchrun --nproc_per_node=2 native_collectives.py

Prints one JSON line per rank: per case, the neuron result and gloo's, as lists.
"""

import os
import sys

import torch
import torch.distributed as dist

from native_report import report  # this folder is the script's path


def cases(rank: int, world: int):
    """(name, fn(device) -> tensors to report)"""
    def values(device, dtype=torch.float32, n=6):
        return (torch.arange(n, dtype=torch.float32) * (rank + 1) - 2.5 * rank).to(dtype).to(device)

    def all_reduce(op, dtype=torch.float32):
        def run(device):
            t = values(device, dtype)
            dist.all_reduce(t, op=op)
            return [t]
        return run

    def broadcast(device):
        t = torch.tensor([rank + 0.5, -0.0 if rank == 1 else 3.0, float("nan"), float("inf")]).to(device)
        dist.broadcast(t, src=1)
        i = torch.tensor([rank * 7 - 3, 2 ** 40 + rank], dtype=torch.int64).to(device)
        dist.broadcast(i, src=0)
        b = torch.tensor([rank == 1, True, False]).to(device)
        dist.broadcast(b, src=1)
        return [t, i, b]

    def all_gather_into_tensor(device):
        out = torch.empty(world * 3, 2, device=device)
        dist.all_gather_into_tensor(out, values(device).reshape(3, 2))
        return [out]

    def all_gather(device):
        outs = [torch.empty(2, 3, dtype=torch.int32, device=device) for _ in range(world)]
        dist.all_gather(outs, values(device, torch.int32).reshape(2, 3))
        return outs

    def reduce_scatter_tensor(op):
        def run(device):
            out = torch.empty(3, device=device)
            dist.reduce_scatter_tensor(out, values(device), op=op)
            return [out]
        return run

    def reduce_scatter(device):
        out = torch.empty(3, device=device)
        dist.reduce_scatter(out, [values(device, n=3) + r for r in range(world)])
        return [out]

    def async_works(device):
        a, b = values(device), values(device) * 2
        works = [dist.all_reduce(a, async_op=True), dist.all_reduce(b, op=dist.ReduceOp.MAX, async_op=True)]
        for w in works:
            w.wait()
        future = dist.all_reduce(values(device), async_op=True).get_future()
        return [a, b, future.wait()[0]]

    def barrier(device):
        dist.barrier()
        return []

    R = dist.ReduceOp
    return [("all_reduce_sum", all_reduce(R.SUM)), ("all_reduce_avg", all_reduce(R.AVG)),
            ("all_reduce_max", all_reduce(R.MAX)), ("all_reduce_min", all_reduce(R.MIN)),
            ("all_reduce_product", all_reduce(R.PRODUCT)), ("all_reduce_band_int32", all_reduce(R.BAND, torch.int32)),
            ("all_reduce_bor_int32", all_reduce(R.BOR, torch.int32)),
            ("all_reduce_bxor_int32", all_reduce(R.BXOR, torch.int32)),
            ("all_reduce_sum_int64", all_reduce(R.SUM, torch.int64)),
            ("all_reduce_sum_bf16", all_reduce(R.SUM, torch.bfloat16)),
            ("broadcast", broadcast), ("all_gather_into_tensor", all_gather_into_tensor), ("all_gather", all_gather),
            ("reduce_scatter_tensor_sum", reduce_scatter_tensor(R.SUM)),
            ("reduce_scatter_tensor_avg", reduce_scatter_tensor(R.AVG)), ("reduce_scatter", reduce_scatter),
            ("async_works", async_works), ("barrier", barrier)]


def listed(tensors):
    return [t.cpu().float().tolist() if t.dtype == torch.bfloat16 else t.cpu().tolist() for t in tensors]


def main():
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
    out = {"rank": rank, "world": world, "device_count": torch.neuron.device_count(),
           "tensor_device": str(torch.ones(1, device=device).device), "results": {},
           "backends": {d: type(dist.group.WORLD._get_backend(torch.device(d))).__name__ for d in ("neuron", "cpu")},
           "backend_name": dist.group.WORLD._get_backend(torch.device("neuron")).name()}
    for name, fn in cases(rank, world):
        neuron = fn(device)
        assert all(t.device.type == "neuron" for t in neuron), name
        out["results"][name] = {"neuron": listed(neuron), "gloo": listed(fn("cpu"))}
    report(out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
