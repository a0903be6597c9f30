"""The JAX smoke set of the version range: devices, a jitted program, a grad, a 2-core shard_map.

Run once with JAX_PLATFORMS=neuron and once with JAX_PLATFORMS=cpu (XLA_FLAGS giving 2 host
devices); prints one JSON line of results to compare.
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

try:
    from jax import shard_map  # JAX 0.8 and newer
except ImportError:
    from jax.experimental.shard_map import shard_map


def main():
    platform = sys.argv[1]
    devices = jax.devices(platform)
    x = jnp.arange(16, dtype=jnp.float32).reshape(4, 4) / 7
    jitted = jax.jit(lambda a: jnp.tanh(a @ a.T).sum(axis=0))(x)
    grad = jax.grad(lambda a: (jnp.sin(a) * a).sum())(x)
    mesh = Mesh(np.array(devices[:2]), ("i",))
    summed = jax.jit(shard_map(lambda a: jax.lax.psum(a, "i"), mesh=mesh, in_specs=P("i"), out_specs=P()))(
        jnp.arange(8, dtype=jnp.float32))
    print(json.dumps({
        "jax": jax.__version__,
        "platform": devices[0].platform,
        "devices": len(devices),
        "jit": np.asarray(jitted).tolist(),
        "grad": np.asarray(grad).tolist(),
        "shard_map_psum": np.asarray(summed).tolist(),
    }))


if __name__ == "__main__":
    main()
