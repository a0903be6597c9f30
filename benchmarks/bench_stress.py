"""Stress, soak and fault drills through the C API; prints counts and slopes, asserts nothing
about time.

- threads: T threads x N cycles of (transfer in, execute, transfer out, delete) on one client,
  every result compared with the stock CPU backend's for the same input; then the same on the
  two clients of a two-process job (through the instance daemon), half the threads each.
- soak: C execute cycles (transfer in, execute, transfer out, delete) on one client with the
  process's RSS, the core's bytes_in_use and the open file descriptors sampled every 1000
  cycles; prints each series' least-squares slope per cycle after the first sample (flat = 0).
- jobs: J start/stop cycles of a two-process job against one daemon (create both clients, one
  all-reduce, destroy), the daemon's RSS sampled each 10 jobs; prints its slope per job.
- kill: a rank SIGKILLed while its peer waits in an all-reduce, and one SIGKILLed in the middle
  of 64 MiB transfers through shared memory; prints how long the peer's all-reduce took to
  fail, and whether a new job on the same cores and daemon runs afterwards.
  Not drilled: a compile killed while it holds the compile cache's lock.

Run: python benchmarks/bench_stress.py [threads|soak|jobs|kill|all] [--threads 8] [--cycles 500]
     [--soak-cycles 10000] [--jobs 100]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("PJRT_NEURON_LOCK_DIR", tempfile.mkdtemp(prefix="pjrt-neuron-stress-locks-"))
os.environ.setdefault("PJRT_NEURON_COLLECTIVE_TIMEOUT", "60")

import pjrt_neuron  # noqa: E402

pjrt_neuron.prepare_environment()
import pjrt_capi as P  # noqa: E402
from programs import ALL_REDUCE, DOUBLE  # noqa: E402

TWO_REPLICAS = P.compile_options_proto(num_replicas=2)


def neuron_api():
    return P.Api(pjrt_neuron.library_path())


def slope(xs, ys) -> float:
    return float(np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)[0]) if len(xs) > 1 else 0.0


def rss_bytes(pid="self") -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def create_world(api, size=2):
    def create(index):
        return api.create_client({"node_id": index, "num_nodes": size, "visible_cores": str(index)})
    with ThreadPoolExecutor(size) as pool:
        return list(pool.map(create, range(size)))


def hammer(clients, threads, cycles, cpu):
    """`threads` threads spread over `clients`, each doing `cycles` checked cycles."""
    executables = [c.compile(DOUBLE) for c in clients]
    reference = cpu.compile(DOUBLE)
    lock = threading.Lock()
    wrong = []

    def worker(index):
        client, executable = clients[index % len(clients)], executables[index % len(clients)]
        rng = np.random.default_rng(index)
        for cycle in range(cycles):
            x = rng.standard_normal((2, 3)).astype(np.float32)
            arg = client.buffer_from_numpy(x)
            (out,), = executable.execute([arg])
            got = out.to_numpy()
            out.destroy()
            arg.destroy()
            with lock:  # the reference client is shared; its answer is the one to match
                ref_arg = cpu.buffer_from_numpy(x)
                (ref_out,), = reference.execute([ref_arg])
                want = ref_out.to_numpy()
                ref_out.destroy()
                ref_arg.destroy()
            if not np.array_equal(got, want):
                with lock:
                    wrong.append((index, cycle))

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    return threads * cycles, len(wrong), time.perf_counter() - start


def run_threads(args, cpu):
    api = neuron_api()
    client = P.Client(api)
    total, wrong, seconds = hammer([client], args.threads, args.cycles, cpu)
    client.close()
    print(f"threads, one client: {args.threads} threads x {args.cycles} cycles = {total} cycles, "
          f"{wrong} wrong results, {seconds:.1f} s")
    world = create_world(api)
    total, wrong, seconds = hammer(world, args.threads, args.cycles, cpu)
    for c in world:
        c.destroy()
    print(f"threads, two-process job through the daemon: {args.threads} threads x {args.cycles} cycles = "
          f"{total} cycles, {wrong} wrong results, {seconds:.1f} s")


def run_soak(args, cpu):
    client = P.Client(neuron_api())
    device = client.addressable_devices()[0]
    executable = client.compile(DOUBLE)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    samples = []
    for cycle in range(args.soak_cycles + 1):
        if cycle % 1000 == 0:
            samples.append((cycle, rss_bytes(), device.memory_stats()["bytes_in_use"], len(os.listdir("/proc/self/fd"))))
        arg = client.buffer_from_numpy(x)
        (out,), = executable.execute([arg])
        if cycle % 1000 == 0:
            assert np.array_equal(out.to_numpy(), x + x)
        out.destroy()
        arg.destroy()
    client.close()
    cycles, rss, hbm, fds = zip(*samples[1:])  # the first thousand warm caches up
    print(f"soak: {args.soak_cycles} execute cycles; RSS {samples[1][1] >> 20} -> {samples[-1][1] >> 20} MiB, "
          f"slope {slope(cycles, rss):.2f} bytes/cycle; bytes_in_use slope {slope(cycles, hbm):.3f} bytes/cycle "
          f"(last {hbm[-1]}); open fds slope {slope(cycles, fds) * 1000:.3f} per 1000 cycles (last {fds[-1]})")


def daemon_pid(lock_dir) -> int:
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"pjrt-neuron-instanced" not in f.read().split(b"\0")[0]:
                    continue
            if os.readlink(f"/proc/{entry}/fd/1").startswith(lock_dir):
                return int(entry)
        except (OSError, ValueError):
            continue
    raise RuntimeError("no daemon")


def all_reduce_once(world):
    def rank(index):
        executable = world[index].compile(ALL_REDUCE, compile_options=TWO_REPLICAS)
        (out,), = executable.execute([world[index].buffer_from_numpy(np.full(2, index + 1, np.float32))])
        return out.to_numpy()
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(rank, range(2)))
    return all(np.array_equal(r, [3.0, 3.0]) for r in results)


def run_jobs(args, cpu):
    api = neuron_api()
    samples, wrong = [], 0
    for job in range(args.jobs):
        world = create_world(api)
        wrong += not all_reduce_once(world)
        if job % 10 == 0:
            samples.append((job, rss_bytes(daemon_pid(os.environ["PJRT_NEURON_LOCK_DIR"]))))
        for c in world:
            c.destroy()
    jobs, rss = zip(*samples[1:])
    print(f"jobs: {args.jobs} two-process jobs against one daemon, {wrong} wrong results; daemon RSS "
          f"{rss[0] >> 20} -> {rss[-1] >> 20} MiB, slope {slope(jobs, rss):.0f} bytes/job")


RANK = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    sys.path.insert(0, {tests!r})
    import pjrt_neuron
    pjrt_neuron.prepare_environment()
    import pjrt_capi as P
    from programs import ALL_REDUCE
    rank = int(sys.argv[1])
    client = P.Api(pjrt_neuron.library_path()).create_client(
        {{"node_id": rank, "num_nodes": 2, "visible_cores": str(rank)}})
    executable = client.compile(ALL_REDUCE, compile_options=P.compile_options_proto(num_replicas=2))
    arg = client.buffer_from_numpy(np.ones(2, np.float32))
    print("ready", flush=True)
    if rank == 1 and sys.argv[2] == "collective":
        time.sleep(3600)  # killed here, before it joins the collective
    if rank == 1:
        big = np.ones(64 << 18, np.float32)  # 64 MiB: through the shared-memory window
        while True:  # killed in the middle of one of these
            client.buffer_from_numpy(big).to_numpy()
    if sys.argv[2] == "transfer":
        sys.stdin.readline()  # rank 1 has been killed mid-transfer
    start = time.monotonic()
    try:
        executable.execute([arg])
        print("no error", flush=True)
    except P.PjrtError as error:
        print(f"error after {{time.monotonic() - start:.2f}} s: {{error.code_name}}: {{error.message[:160]}}", flush=True)
""")


def kill_drill(what):
    script = RANK.format(tests=str(REPO / "tests"))
    env = {**os.environ, "PJRT_NEURON_COLLECTIVE_TIMEOUT": "60"}
    ranks = [subprocess.Popen([sys.executable, "-c", script, str(r), what], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for r in range(2)]
    for r in ranks:
        assert r.stdout.readline().strip() == "ready"
    time.sleep(1.0)  # rank 0 waits in the all-reduce, or rank 1 is transferring
    ranks[1].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    if what == "transfer":
        ranks[1].wait()
        ranks[0].stdin.write("go\n")
        ranks[0].stdin.flush()
    line = ranks[0].stdout.readline().strip()
    seen = time.monotonic() - killed_at
    ranks[0].wait()
    ranks[1].wait()
    world = create_world(neuron_api())  # the same cores: free again, the daemon still serving
    serving = all_reduce_once(world)
    for c in world:
        c.destroy()
    print(f"kill mid-{what}: the surviving rank's all-reduce, {seen:.2f} s after the SIGKILL: {line}; "
          f"a new job on the same cores and daemon afterwards: {'ok' if serving else 'WRONG'}")


def run_kill(args, cpu):
    kill_drill("collective")
    kill_drill("transfer")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="?", default="all", choices=["threads", "soak", "jobs", "kill", "all"])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--soak-cycles", type=int, default=10000)
    parser.add_argument("--jobs", type=int, default=100)
    args = parser.parse_args()
    cpu = P.Client(P.Api(P.cpu_plugin_path()))
    for name, run in [("threads", run_threads), ("soak", run_soak), ("jobs", run_jobs), ("kill", run_kill)]:
        if args.what in (name, "all"):
            run(args, cpu)


if __name__ == "__main__":
    main()
