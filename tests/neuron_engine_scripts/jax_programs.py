"""JAX programs on the `neuron` platform, for running once per engine and comparing.

Prints one JSON object on the last line: each case's result as nested lists, or
{"error": "..."} when the case failed. Run with PJRT_NEURON_ENGINE=neuron (on the stand-in)
and with PJRT_NEURON_ENGINE=sim; the numbers must agree, and with numpy.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np


def case(results, name, run):
    try:
        results[name] = np.asarray(run()).tolist()
    except Exception as error:  # noqa: BLE001 - the message is the result
        results[name] = {"error": f"{type(error).__name__}: {error}"}


def spmd_cases(results, devices):
    """Programs of several partitions: GSPMD's (or Shardy's) collectives, shard_map's, a step."""
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = jax.sharding.Mesh(np.array(devices), ("x",))
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    w = np.linspace(1, -1, 48, dtype=np.float32).reshape(8, 6)
    rows = jax.device_put(x, NamedSharding(mesh, P("x", None)))
    cols = jax.device_put(x, NamedSharding(mesh, P(None, "x")))
    w_rows = jax.device_put(w, NamedSharding(mesh, P("x", None)))
    # Contracting over a sharded dimension: partial products all-reduced.
    case(results, "spmd_contracted_matmul", lambda: jax.jit(lambda a, b: a @ b)(cols, w_rows))
    # Rows sharded, reduced over everything: a cross-partition sum.
    case(results, "spmd_total", lambda: jax.jit(lambda a: jnp.sum(jnp.tanh(a)))(rows))
    # A reshard: rows to columns (all-to-all or all-gather).
    case(results, "spmd_reshard", lambda: jax.jit(
        lambda a: a * 2.0, out_shardings=NamedSharding(mesh, P(None, "x")))(rows))
    # Its position in the mesh: partition-id.
    case(results, "spmd_axis_index", lambda: jax.jit(jax.shard_map(
        lambda a: a + jax.lax.axis_index("x").astype(a.dtype), mesh=mesh, in_specs=P("x"), out_specs=P("x")))(rows))
    case(results, "shard_map_collectives", lambda: jax.jit(jax.shard_map(
        lambda a: jnp.concatenate([jax.lax.psum(a, "x"), jax.lax.all_gather(a, "x", tiled=True)[:2],
                                   jax.lax.ppermute(a, "x", [(0, 1), (1, 0)])], axis=1),
        mesh=mesh, in_specs=P("x"), out_specs=P("x")))(rows))

    def step():
        def loss(w, a):
            return jnp.mean((jnp.tanh(a @ w) - 0.5) ** 2)
        update = jax.jit(lambda w, a: w - 0.1 * jax.grad(loss)(w, a), donate_argnums=0)
        weights = jax.device_put(w, NamedSharding(mesh, P(None, "x")))
        for _ in range(3):
            weights = update(weights, rows)
        return weights
    case(results, "spmd_training_steps", step)


def main():
    devices = jax.devices("neuron")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    results = {"num_devices": len(devices), "platform_version": devices[0].client.platform_version}
    on = jax.device_put(a, devices[0]), jax.device_put(b, devices[0])

    case(results, "add", lambda: jax.jit(lambda x: x + x)(on[0]))
    case(results, "matmul", lambda: jax.jit(lambda x, y: jnp.tanh(x @ y) * 2.0)(*on))
    case(results, "two_results", lambda: jnp.concatenate(
        [r.ravel() for r in jax.jit(lambda x, y: (x.sum(axis=0), y.T))(*on)]))
    case(results, "pass_through", lambda: jnp.concatenate(
        [r.ravel() for r in jax.jit(lambda x, y: (x, y + 1.0))(*on)]))

    def donated():
        step = jax.jit(lambda w, g: w - 0.5 * g, donate_argnums=0)
        w = jax.device_put(a, devices[0])
        w = step(w, jax.device_put(a * 2, devices[0]))
        w = step(w, jnp.ones_like(w))
        return w
    case(results, "donated", donated)

    case(results, "second_core", lambda: jax.jit(lambda x: x * 3.0)(jax.device_put(a, devices[-1])))
    if len(devices) >= 2:
        case(results, "pmap_psum", lambda: jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i",
                                                     devices=devices[:2])(np.stack([a, a * 10])))
        mesh = jax.sharding.Mesh(np.array(devices[:2]), ("x",))
        sharded = jax.device_put(np.arange(8, dtype=np.float32),
                                 jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x")))
        case(results, "sharded_jit", lambda: jax.jit(lambda x: x * 2.0)(sharded))
        spmd_cases(results, devices[:2])
    print(json.dumps(results))


if __name__ == "__main__":
    main()
