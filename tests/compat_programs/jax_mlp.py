"""A few float32 training steps of a small MLP in JAX: nothing Trainium rejects or changes."""

import jax
import jax.numpy as jnp
import numpy as np


def loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)


@jax.jit
def step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), value


if __name__ == "__main__":
    # Data and weights from NumPy, so the training step is the only program (jax.random has
    # its own case, jax_random.py).
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 8), dtype=np.float32)
    y = np.sin(x[:, :1])
    params = ((rng.standard_normal((8, 16), dtype=np.float32) * 0.3, np.zeros(16, np.float32)),
              (rng.standard_normal((16, 1), dtype=np.float32) * 0.3, np.zeros(1, np.float32)))
    losses = []
    for _ in range(5):
        params, value = step(params, x, y)
        losses.append(float(value))
    assert losses[-1] < losses[0], losses
    print("losses", losses)
