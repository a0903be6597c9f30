"""pjrt_neuron.estimate() around a block: a matmul run once before the block, three times inside."""

import json

import jax
import jax.numpy as jnp

import pjrt_neuron

if __name__ == "__main__":
    a, b = jnp.ones((256, 512)), jnp.ones((512, 128))
    (a + 1).block_until_ready()  # outside the block: not in the estimate
    with pjrt_neuron.estimate(["trn1.2xlarge", "trn2.48xlarge"], unit="samples", per_step=256,
                              prices={"trn2.48xlarge": 40}) as e:
        matmul = jax.jit(lambda a, b: a @ b)
        for _ in range(3):
            matmul(a, b).block_until_ready()
    print(e)
    print("RESULT " + json.dumps(e.instances))
