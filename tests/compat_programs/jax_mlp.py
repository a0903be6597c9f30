"""A few float32 training steps of a small MLP in JAX: nothing Trainium rejects or changes."""

import jax
import jax.numpy as jnp


def loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 + b2 - y) ** 2)


@jax.jit
def step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), value


if __name__ == "__main__":
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(k1, (32, 8), jnp.float32)
    y = jnp.sin(x[:, :1])
    params = ((jax.random.normal(k2, (8, 16)) * 0.3, jnp.zeros(16)), (jax.random.normal(k3, (16, 1)) * 0.3, jnp.zeros(1)))
    losses = []
    for _ in range(5):
        params, value = step(params, x, y)
        losses.append(float(value))
    assert losses[-1] < losses[0], losses
    print("losses", losses)
