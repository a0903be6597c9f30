"""One process of bench_distributed.py's transfer measurement (JAX).

Times host -> device -> host round trips (device_put, block_until_ready, np.asarray) of arrays
of the given sizes on this process's first device, and prints one JSON line from process 0:
{"platform": ..., "processes": N, "milliseconds": {"MiB": median ms}}.
With --num-processes 2 the processes join with jax.distributed.initialize first, so on NEURON
every transfer goes through the instance daemon.
"""

import argparse
import json
import statistics
import time

import jax
import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--num-processes", type=int, default=1)
    parser.add_argument("--coordinator", default=None, help="HOST:PORT of process 0")
    parser.add_argument("--mib", default="1,16,64", help="comma-separated sizes in MiB")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if args.num_processes > 1:
        jax.distributed.initialize(coordinator_address=args.coordinator, num_processes=args.num_processes,
                                   process_id=args.process_id)
    device = jax.local_devices()[0]
    milliseconds = {}
    for mib in (int(m) for m in args.mib.split(",")):
        host = np.ones(mib << 18, np.float32)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            on_device = jax.device_put(host, device)
            on_device.block_until_ready()
            back = np.asarray(on_device)
            times.append(time.perf_counter() - start)
            assert back[-1] == 1.0
            on_device.delete()
        milliseconds[str(mib)] = statistics.median(times) * 1e3
    if args.process_id == 0:
        print(json.dumps({"platform": device.platform, "processes": args.num_processes, "milliseconds": milliseconds}),
              flush=True)


if __name__ == "__main__":
    main()
