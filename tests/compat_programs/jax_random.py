"""jax.random with jax_enable_x64 off (the default): the program holds no 64-bit value the user
asked for. JAX's threefry lowering counts array positions in uint64 internally, values that
narrowing to 32 bits cannot change below 2^32 elements."""

import jax
import jax.numpy as jnp

if __name__ == "__main__":
    assert not jax.config.jax_enable_x64
    key, sub = jax.random.split(jax.random.key(0))  # clean: random-split
    noise = jax.random.normal(sub, (4, 3), jnp.float32)  # clean: random-normal
    print(noise.dtype, float(jnp.sum(noise)))
