"""An all-reduce (psum) of f32[1024] over the 2 NeuronCores of a trn1.2xlarge, run 3 times."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

if __name__ == "__main__":
    mesh = Mesh(np.array(jax.devices()[:2]), ("x",))
    psum = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    v = jnp.arange(2 * 1024, dtype=jnp.float32)
    for _ in range(3):
        out = psum(v)
    out.block_until_ready()
