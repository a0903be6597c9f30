"""One rank of a two-rank torchrun job on `neuron` that goes wrong on purpose; prints one JSON line.

    torchrun --nproc_per_node=2 native_faults.py mismatch   # ranks all_reduce different shapes
    torchrun --nproc_per_node=2 native_faults.py dead       # rank 1 exits; rank 0 all_reduces again
    torchrun --nproc_per_node=2 native_faults.py absent     # rank 1 never comes (process group timeout 5 s)
"""

import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from native_report import report  # this folder is the script's path


def attempt(fn) -> dict:
    start = time.monotonic()
    try:
        fn()
        return {"error": None, "seconds": time.monotonic() - start}
    except Exception as e:  # noqa: BLE001
        return {"error": type(e).__name__, "is_dist_backend_error": isinstance(e, dist.DistBackendError),
                "message": str(e), "seconds": round(time.monotonic() - start, 2)}


def main(case: str):
    dist.init_process_group(timeout=timedelta(seconds=5) if case == "absent" else None)
    rank = dist.get_rank()
    device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
    warm = torch.ones(2, device=device)
    dist.all_reduce(warm)  # the job works before it goes wrong
    result = {"rank": rank, "warm": warm.cpu().tolist()}
    if case == "mismatch":
        result.update(attempt(lambda: dist.all_reduce(torch.ones(4 + rank, device=device))))
    elif case == "dead":
        if rank == 1:
            os._exit(0)  # leaves without a word (exit status 0, so torchrun lets rank 0 go on)
        time.sleep(1.0)
        result.update(attempt(lambda: dist.all_reduce(torch.ones(2, device=device))))
    elif case == "absent":
        if rank == 1:
            time.sleep(12)
            os._exit(0)
        result.update(attempt(lambda: dist.all_reduce(torch.ones(2, device=device))))
    report(result)
    os._exit(0)  # the failed collective's launch may still wait in the plugin; nothing to tear down


if __name__ == "__main__":
    main(sys.argv[1])
