"""An all-reduce (psum) of f32[1024] over CORES NeuronCores (default 2), run 3 times."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

if __name__ == "__main__":
    cores = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    mesh = Mesh(np.array(jax.devices()[:cores]), ("x",))
    psum = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    v = jnp.arange(cores * 1024, dtype=jnp.float32)
    for _ in range(3):
        out = psum(v)
    out.block_until_ready()
