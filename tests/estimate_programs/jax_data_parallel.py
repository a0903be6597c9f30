"""Two training steps of a float32 MLP, its global batch split over `CORES` NeuronCores (data
parallel: the partitioner all-reduces the gradients): `jax_data_parallel.py CORES`."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

BATCH, WIDTH = 2048, 512


def loss(params, x, y):
    w1, w2 = params
    return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)


@jax.jit
def step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)


if __name__ == "__main__":
    cores = int(sys.argv[1])
    mesh = Mesh(np.array(jax.devices()[:cores]), ("data",))
    batch, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal((BATCH, WIDTH), dtype=np.float32), batch)
    y = jax.device_put(rng.standard_normal((BATCH, WIDTH), dtype=np.float32), batch)
    params = tuple(jax.device_put(rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) * 0.05, replicated)
                   for _ in range(2))
    for _ in range(2):
        params = step(params, x, y)
    jax.block_until_ready(params)
