"""One process of a multi-process JAX job on localhost, one device per process.

Start one copy per process, all with the same coordinator:

    JAX_PLATFORMS=neuron python jax_two_process.py --process-id 0 --num-processes 2 --coordinator 127.0.0.1:PORT &
    JAX_PLATFORMS=neuron python jax_two_process.py --process-id 1 --num-processes 2 --coordinator 127.0.0.1:PORT

JAX_PLATFORMS=cpu gives the reference run (cross-process collectives through gloo).

The checks run on a global 1-D mesh over every process's device: psum, all_gather and
ppermute in shard_map, a global array built from per-process callbacks, and a few steps of
data-parallel linear regression. Every process prints one JSON line at the end with the
global values, so all processes print the same numbers apart from "process" and
"local_rows". Inputs come from fixed seeds and small integers, so a neuron run and a cpu
run can be compared. A collective that fails prints {"process": i, "error": ...} instead
and exits with status 1.

Failure drills, for the peer's error handling (process 0 must fail, not hang):
  --die-after-init   process 1 exits with status 3 right after initialize
  --skip-collective  process 1 sleeps --skip-sleep seconds instead of joining the psum,
                     then exits with status 0
"""

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

CHECKS = ("psum", "all_gather", "ppermute", "global_array", "train")
DIE_STATUS = 3
FAILING_PROCESS = 1
ROWS_PER_DEVICE = 4
FEATURES = 3
TRAIN_STEPS = 5
LEARNING_RATE = 0.1


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--process-id", type=int, required=True)
    parser.add_argument("--num-processes", type=int, default=2)
    parser.add_argument("--coordinator", required=True, help="HOST:PORT of process 0")
    parser.add_argument("--check", choices=("all",) + CHECKS, default="all",
                        help="run one check only (the device counts are always checked)")
    drills = parser.add_mutually_exclusive_group()
    drills.add_argument("--die-after-init", action="store_true")
    drills.add_argument("--skip-collective", action="store_true")
    parser.add_argument("--skip-sleep", type=float, default=600.0,
                        help="seconds process 1 sleeps with --skip-collective")
    parser.add_argument("--init-timeout", type=int, default=300,
                        help="seconds to wait for every process to join")
    parser.add_argument("--heartbeat-timeout", type=int, default=100,
                        help="seconds after which a silent process counts as dead")
    return parser.parse_args(argv)


def platform():
    return os.environ.get("JAX_PLATFORMS", "cpu").split(",")[0]


def initialize(args):
    # No NEURON_RT_VISIBLE_CORES: on neuron each process takes its share of the instance itself.
    if platform() == "cpu":
        # gloo is the default in jax 0.10; older releases had no CPU collectives by default.
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=args.coordinator,
        num_processes=args.num_processes,
        process_id=args.process_id,
        initialization_timeout=args.init_timeout,
        heartbeat_timeout_seconds=args.heartbeat_timeout)


def check_devices(args):
    facts = {
        "process": jax.process_index(),
        "process_count": jax.process_count(),
        "platform": jax.devices()[0].platform,
        "device_count": jax.device_count(),
        "local_device_count": jax.local_device_count(),
        "device_ids": [d.id for d in jax.devices()],
        "device_process_indices": [d.process_index for d in jax.devices()],
    }
    problems = []
    if facts["device_count"] != args.num_processes:
        problems.append(f"device_count {facts['device_count']} != {args.num_processes}")
    if facts["local_device_count"] != 1:
        problems.append(f"local_device_count {facts['local_device_count']} != 1")
    if facts["process"] != args.process_id:
        problems.append(f"process_index {facts['process']} != --process-id {args.process_id}")
    if facts["process_count"] != args.num_processes:
        problems.append(f"process_count {facts['process_count']} != {args.num_processes}")
    return facts, problems


def global_rows(num_devices):
    """Small integers, so sums are exact in any order on any backend."""
    rows = num_devices * ROWS_PER_DEVICE
    return (np.arange(rows * FEATURES, dtype=np.float32).reshape(rows, FEATURES) % 7) - 3


def sharded(mesh, host_array, spec):
    """A global array whose shards each process fills from its own copy of `host_array`."""
    return jax.make_array_from_callback(
        host_array.shape, NamedSharding(mesh, spec), lambda index: host_array[index])


def as_list(array):
    return np.asarray(multihost_utils.process_allgather(array, tiled=True)).tolist()


def run_psum(mesh, x):
    psum = jax.jit(jax.shard_map(lambda block: jax.lax.psum(block, "x"),
                                 mesh=mesh, in_specs=P("x"), out_specs=P()))
    return as_list(psum(x))


def run_all_gather(mesh, x):
    """Every device's gathered copy, stacked: each copy must be all of `x`."""
    gather = jax.jit(jax.shard_map(lambda block: jax.lax.all_gather(block, "x", tiled=True),
                                   mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    return as_list(gather(x))


def run_ppermute(mesh, x):
    n = mesh.size
    shift = [(i, (i + 1) % n) for i in range(n)]
    permute = jax.jit(jax.shard_map(lambda block: jax.lax.ppermute(block, "x", shift),
                                    mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    return as_list(permute(x))


def run_train(mesh):
    """Linear regression, data sharded over "x", parameters replicated; GSPMD averages the gradients."""
    rng = np.random.default_rng(0)
    rows = mesh.size * ROWS_PER_DEVICE * 4
    features = rng.normal(size=(rows, FEATURES)).astype(np.float32)
    true_w = np.array([1.5, -2.0, 0.5], dtype=np.float32)
    targets = (features @ true_w + 0.25).astype(np.float32)

    data = NamedSharding(mesh, P("x"))
    replicated = NamedSharding(mesh, P())
    xs = sharded(mesh, features, P("x"))
    ys = sharded(mesh, targets, P("x"))
    params = jax.device_put({"w": np.zeros(FEATURES, np.float32), "b": np.float32(0.0)},
                            replicated)

    def loss_fn(p, x, y):
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    def step(p, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree.map(lambda v, g: v - LEARNING_RATE * g, p, grads), loss

    train_step = jax.jit(step, in_shardings=(replicated, data, data),
                         out_shardings=(replicated, replicated))
    losses = []
    for _ in range(TRAIN_STEPS):
        params, loss = train_step(params, xs, ys)
        losses.append(as_list(loss))
    return losses, {"w": as_list(params["w"]), "b": as_list(params["b"])}


def drill(args):
    """The failure drills for process 1; returns only if there is nothing to do."""
    if args.process_id != FAILING_PROCESS:
        return
    if args.die_after_init:
        # A local computation only: the peer has seen us alive before we go.
        float(jnp.arange(4.0).sum())
        print(f"process {args.process_id}: exiting with {DIE_STATUS} after initialize", flush=True)
        # os._exit skips jax's shutdown barrier, which would wait for the peer: this is a crash.
        os._exit(DIE_STATUS)
    if args.skip_collective:
        print(f"process {args.process_id}: sleeping {args.skip_sleep} s instead of the psum",
              flush=True)
        time.sleep(args.skip_sleep)
        os._exit(0)


def run_checks(args, report):
    mesh = Mesh(np.array(jax.devices()), ("x",))
    wanted = CHECKS if args.check == "all" else (args.check,)
    x = sharded(mesh, global_rows(mesh.size), P("x"))
    # psum first: it is the collective the drills leave process 0 waiting in.
    if "psum" in wanted:
        report["psum"] = run_psum(mesh, x)
    if "all_gather" in wanted:
        report["all_gather"] = run_all_gather(mesh, x)
    if "ppermute" in wanted:
        report["ppermute"] = run_ppermute(mesh, x)
    if "global_array" in wanted:
        report["global_array"] = as_list(x)
        report["local_rows"] = [
            [shard.index[0].start or 0, shard.index[0].stop] for shard in x.addressable_shards]
    if "train" in wanted:
        report["losses"], report["final_params"] = run_train(mesh)



def main(argv=None):
    args = parse_args(argv)
    initialize(args)

    report, problems = check_devices(args)
    drill(args)
    try:
        run_checks(args, report)
    except jax.errors.JaxRuntimeError as error:
        print(json.dumps({"process": report["process"], "error": str(error)}), flush=True)
        # os._exit: jax's shutdown barrier would wait for a dead peer and then abort the process.
        os._exit(1)
    report["problems"] = problems
    print(json.dumps(report), flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
