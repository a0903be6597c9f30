"""Unreduced and reduced axes, the constructs JAX 0.10's own tests use, on `platform`'s first N
devices of an explicit mesh, for each N. Prints one JSON line: {N: {case: {"shards": [...],
"value": [...]} or {"error": type, "message": text}}}. Run once with JAX_PLATFORMS=cpu (forced
host devices) and once on neuron; tests/test_unreduced.py compares the two.

Usage: python unreduced_sweep.py PLATFORM N[,N...]
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

platform = sys.argv[1]
reshard = jax.sharding.reshard


def shards(a):
    return [np.asarray(s.data).tolist() for s in sorted(a.addressable_shards, key=lambda s: s.device.id)]


def reduce_sum_of_unreduced():
    x = jax.device_put(jnp.arange(4, dtype=jnp.float32), NamedSharding(mesh, P()))
    u = reshard(x, P(unreduced={"x"}))
    r = jax.jit(lambda x: jax.lax.reduce_sum(x, axes=[0]))(u)
    return shards(r), reshard(r, P())


def reduce_sum_of_assembled_unreduced():
    # Partial sums placed shard by shard (the first core holds the value, the others zeros), then
    # summed and resolved: no replicated value is made unreduced on the way.
    x = np.arange(4, dtype=np.float32)
    parts = [jax.device_put(x if i == 0 else np.zeros_like(x), d) for i, d in enumerate(mesh.devices.flat)]
    u = jax.make_array_from_single_device_arrays((4,), NamedSharding(mesh, P(unreduced={"x"})), parts)
    r = jax.jit(lambda x: jax.lax.reduce_sum(x, axes=[0]))(u)
    return shards(r), reshard(r, P())


def psum_into_unreduced():
    x = jax.device_put(jnp.arange(4 * n, dtype=jnp.float32).reshape(n, 4), NamedSharding(mesh, P("x")))
    f = jax.shard_map(lambda b: b.sum(0), in_specs=P("x"), out_specs=P(unreduced={"x"}))
    u = jax.jit(f)(x)
    return shards(u), reshard(u, P())


def reshard_unreduced_to_sharded():
    x = jax.device_put(jnp.arange(2 * n, dtype=jnp.float32) - 3.0, NamedSharding(mesh, P()))
    u = reshard(x, P(unreduced={"x"}))
    s = jax.jit(lambda u: reshard(u, P("x")))(u)
    return shards(s), reshard(s, P())


def dot_general_unreduced_output():
    a = jax.device_put(jnp.arange(3 * 2 * n, dtype=jnp.float32).reshape(3, 2 * n) / 7, NamedSharding(mesh, P(None, "x")))
    b = jax.device_put(jnp.arange(2 * n * 5, dtype=jnp.float32).reshape(2 * n, 5) / 5, NamedSharding(mesh, P("x", None)))
    c = jax.jit(lambda a, b: jnp.einsum("ij,jk->ik", a, b, out_sharding=P(None, None, unreduced={"x"})))(a, b)
    return shards(c), reshard(c, P())


def grad_through_unreduced():
    a = jax.device_put(jnp.arange(3 * 2 * n, dtype=jnp.float32).reshape(3, 2 * n) / 7, NamedSharding(mesh, P(None, "x")))
    b = jax.device_put(jnp.arange(2 * n * 5, dtype=jnp.float32).reshape(2 * n, 5) / 5, NamedSharding(mesh, P("x", None)))

    def loss(a, b):
        c = jnp.einsum("ij,jk->ik", a, b, out_sharding=P(None, None, unreduced={"x"}))
        return (reshard(c, P()) ** 2).sum()

    ga, gb = jax.jit(jax.grad(loss, argnums=(0, 1)))(a, b)
    return [], jnp.concatenate([reshard(ga, P()).ravel(), reshard(gb, P()).ravel()])


def reduced_input_grad():
    # reduced: replicated values whose cotangent comes back unreduced (JAX 0.10's `reduced`).
    w = jax.device_put(jnp.arange(4, dtype=jnp.float32) / 3, NamedSharding(mesh, P(reduced={"x"})))
    x = jax.device_put(jnp.arange(4, dtype=jnp.float32) - 1.5, NamedSharding(mesh, P(reduced={"x"})))
    g = jax.jit(jax.grad(lambda w, x: (jnp.sin(x * w)).sum()))(w, x)
    return shards(g), reshard(g, P())


CASES = [reduce_sum_of_unreduced, reduce_sum_of_assembled_unreduced, psum_into_unreduced, reshard_unreduced_to_sharded, dot_general_unreduced_output,
         grad_through_unreduced, reduced_input_grad]
results = {}
for n in [int(v) for v in sys.argv[2].split(",")]:
    mesh = jax.sharding.Mesh(np.array(jax.devices(platform)[:n]), ("x",), axis_types=(AxisType.Explicit,))
    out = results[n] = {}
    with jax.set_mesh(mesh):
        for case in CASES:
            try:
                got_shards, value = case()
                out[case.__name__] = {"shards": got_shards, "value": np.asarray(value).tolist()}
            except Exception as e:  # noqa: BLE001 - the error is the result
                out[case.__name__] = {"error": type(e).__name__, "message": str(e)[:600]}
print(json.dumps(results))
