"""Training steps of a small MLP in JAX: `jax_mlp.py STEPS [float32|bfloat16]`; torch_mlp.py is the
same model (float32) in torch-xla."""

import sys

import jax
import jax.numpy as jnp
import numpy as np

BATCH, IN, HIDDEN, OUT = 64, 32, 128, 16


def loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)


@jax.jit
def step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads), value


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    dtype = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}[sys.argv[2] if len(sys.argv) > 2 else "float32"]
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((BATCH, IN), dtype=np.float32), dtype)
    y = jnp.asarray(rng.standard_normal((BATCH, OUT), dtype=np.float32), dtype)
    params = ((jnp.asarray(rng.standard_normal((IN, HIDDEN), dtype=np.float32) * 0.1, dtype), jnp.zeros(HIDDEN, dtype)),
              (jnp.asarray(rng.standard_normal((HIDDEN, OUT), dtype=np.float32) * 0.1, dtype), jnp.zeros(OUT, dtype)))
    for _ in range(steps):
        params, value = step(params, x, y)
    print("loss", float(value))
