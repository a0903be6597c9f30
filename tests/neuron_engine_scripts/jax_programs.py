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
    print(json.dumps(results))


if __name__ == "__main__":
    main()
