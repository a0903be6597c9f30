"""Runs one JAX program, then exits with code 3."""

import sys

import jax.numpy as jnp

if __name__ == "__main__":
    (jnp.ones(8) * 2).block_until_ready()
    sys.exit(3)
