"""Host offload on NeuronCore 0 and on the CPU backend in one process (JAX_PLATFORMS=neuron,cpu).
Prints one JSON line: {case: {"neuron": {...}, "cpu": {...}}} with each result's values, memory
kinds and (on neuron) the HBM bytes in use after the call beyond its committed inputs; or
{"error": type, "message": text}. tests/test_host_offload.py compares them.
"""

import gc
import json

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import SingleDeviceSharding

x_host = np.arange(4 * 6, dtype=np.float32).reshape(4, 6) / 7


def f_one(v):
    return jnp.tanh(v) @ v.T


def f_two(v):
    return jnp.tanh(v) @ v.T, v * 3 + 1


def cases(dev):
    pinned = SingleDeviceSharding(dev, memory_kind="pinned_host")
    hbm = SingleDeviceSharding(dev, memory_kind="device")
    return {
        "one_output_to_pinned_host_uncommitted": lambda: jax.jit(f_one, out_shardings=pinned)(x_host),
        "one_output_to_pinned_host_committed": lambda: jax.jit(f_one, out_shardings=pinned)(jax.device_put(x_host, hbm)),
        "two_outputs_one_to_pinned_host": lambda: jax.jit(f_two, out_shardings=(pinned, hbm))(jax.device_put(x_host, hbm)),
        "device_put_to_pinned_host_inside_jit": lambda: jax.jit(lambda v: jax.device_put(v * 2, pinned))(
            jax.device_put(x_host, hbm)),
        "checkpoint_offload_dot_with_no_batch_dims": lambda: jax.jit(jax.grad(_offloaded_loss))(jax.device_put(x_host, hbm)),
    }


def _offloaded_loss(w):
    policy = jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")

    @jax.checkpoint
    def layer(h):
        return jnp.sin(h @ w.T @ w)

    layer = jax.checkpoint(layer.__wrapped__ if hasattr(layer, "__wrapped__") else layer, policy=policy)
    h = jnp.ones((3, 6), jnp.float32)
    for _ in range(3):
        h = layer(h)
    return (h ** 2).sum()


def describe(result, dev):
    leaves = jax.tree.leaves(result)
    for leaf in leaves:
        leaf.block_until_ready()
    out = {"values": [np.asarray(leaf).tolist() for leaf in leaves],
           "memory_kinds": [leaf.sharding.memory_kind for leaf in leaves]}
    if dev.platform == "neuron":
        out["device_bytes_of_results"] = sum(leaf.nbytes for leaf in leaves if leaf.sharding.memory_kind == "device")
    return out


report = {}
for platform in ("neuron", "cpu"):
    dev = jax.devices(platform)[0]
    for name, run in cases(dev).items():
        gc.collect()
        start = dev.memory_stats()["bytes_in_use"] if platform == "neuron" else 0
        try:
            result = run()
            entry = describe(result, dev)
            if platform == "neuron":
                gc.collect()
                entry["hbm_bytes_beyond_start"] = dev.memory_stats()["bytes_in_use"] - start
            del result
        except Exception as e:  # noqa: BLE001 - the error is the result
            entry = {"error": type(e).__name__, "message": str(e)[:600]}
        report.setdefault(name, {})[platform] = entry
print(json.dumps(report))
