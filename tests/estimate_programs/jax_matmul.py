"""A [256, 512] x [512, 128] matmul, jitted, run a few times: `jax_matmul.py DTYPE RUNS`."""

import sys

import jax
import jax.numpy as jnp
import numpy as np

if __name__ == "__main__":
    dtype = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}[sys.argv[1]]
    runs = int(sys.argv[2])
    m, k, n = (int(v) for v in sys.argv[3:6]) if len(sys.argv) > 3 else (256, 512, 128)
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((m, k), dtype=np.float32)).astype(dtype)
    b = jnp.asarray(rng.standard_normal((k, n), dtype=np.float32)).astype(dtype)
    matmul = jax.jit(lambda a, b: a @ b)
    for _ in range(runs):
        c = matmul(a, b)
    c.block_until_ready()
