"""One process of bench_distributed.py's transfer measurement (JAX).

Times host -> device -> host round trips (device_put, block_until_ready, np.asarray) of arrays
of the given sizes on this process's first device, and prints one JSON line from process 0:
{"platform": ..., "processes": N, "milliseconds": {"MiB": median ms}, "per_call_us": {...}}.
per_call_us holds the median microseconds of small calls: a jitted 8-element add and its
wait ("execute"), and a 4 KiB device_put and its wait ("upload 4 KiB") and np.asarray back
("download 4 KiB").
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
    per_call_us = small_calls(device, args.repeats)
    if args.process_id == 0:
        print(json.dumps({"platform": device.platform, "processes": args.num_processes, "milliseconds": milliseconds,
                          "per_call_us": per_call_us}), flush=True)


def small_calls(device, repeats: int, number: int = 200) -> dict:
    """Median microseconds per small call (see the module docstring)."""
    small = jax.device_put(np.ones(8, np.float32), device)
    add = jax.jit(lambda x: x + 1)
    add(small).block_until_ready()
    host = np.ones(1024, np.float32)
    placed = [jax.device_put(host, device).block_until_ready() for _ in range(number)]

    def execute():
        add(small).block_until_ready()

    def upload():
        jax.device_put(host, device).block_until_ready()

    def download():  # a fresh array each call: np.asarray caches its result
        np.asarray(placed.pop())

    out = {}
    for name, fn in (("execute", execute), ("upload 4 KiB", upload), ("download 4 KiB", download)):
        samples = []
        for _ in range(repeats):
            if name.startswith("download"):
                placed[:] = [jax.device_put(host, device).block_until_ready() for _ in range(number)]
            start = time.perf_counter()
            for _ in range(number):
                fn()
            samples.append((time.perf_counter() - start) / number * 1e6)
        out[name] = statistics.median(samples)
    return out


if __name__ == "__main__":
    main()
