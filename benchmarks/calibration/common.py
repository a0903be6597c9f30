"""What every calibration script does: build a published model from its Hugging Face configuration
with random weights (on the host CPU, no download), put it on one simulated NeuronCore, and run
one step there (inference: a forward at the published batch; training: forward and backward in one
program, the optimizer's update in another), so `pjrt-neuron estimate` reads the compiled programs.

Run as `JAX_PLATFORMS=neuron,cpu python benchmarks/calibration/<row>.py`; the benchmark
(benchmarks/bench_estimate_calibration.py) does that for each row.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

SEQUENCE = 128  # every published encoder row uses sequence length 128


def _devices():
    try:
        host = jax.devices("cpu")[0]
    except RuntimeError as error:
        raise SystemExit(f"{error}\n(run with JAX_PLATFORMS=neuron,cpu: the weights are made on the host)") from None
    return host, jax.devices("neuron")[0]


def _build(model_class, config):
    host, core = _devices()
    with jax.default_device(host):
        model = model_class(config, seed=0)
    return model, jax.device_put(model.params, core), core


def text_inputs(batch: int, vocab: int) -> dict:
    rng = np.random.default_rng(0)
    return {"input_ids": rng.integers(0, vocab, (batch, SEQUENCE), dtype=np.int32),
            "attention_mask": np.ones((batch, SEQUENCE), np.int32)}


def image_inputs(batch: int, channels_last: bool = False) -> dict:
    shape = (batch, 224, 224, 3) if channels_last else (batch, 3, 224, 224)
    return {"pixel_values": np.random.default_rng(0).standard_normal(shape, dtype=np.float32)}


def serve(model_class, config, inputs: dict) -> None:
    """One forward pass at the published batch, as a compiled inference program."""
    model, params, core = _build(model_class, config)
    inputs = jax.device_put(inputs, core)
    # The model's own call fills the inputs a module requires (token types, positions).
    forward = jax.jit(lambda p, kw: model(**kw, params=p, train=False))
    jax.block_until_ready(forward(params, inputs))


def train(model_class, config, inputs: dict, labels: np.ndarray) -> None:
    """One training step: forward, cross-entropy, backward (a program returning the gradients),
    then AdamW's update (a second program), as data-parallel training runs them per core."""
    model, params, core = _build(model_class, config)
    inputs, labels = jax.device_put((inputs, labels), core)

    def loss(p, kw, y):
        logits = model(**kw, params=p, train=False).logits.reshape(y.shape + (-1,))
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[..., None], axis=-1))

    gradients = jax.jit(jax.grad(loss))

    @jax.jit
    def adamw(p, g, m, v):
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        return jax.tree.map(lambda p, m, v: p - 1e-4 * (m / (jnp.sqrt(v) + 1e-8) + 0.01 * p), p, m, v), m, v

    grads = gradients(params, inputs, labels)
    zeros = jax.device_put(jax.tree.map(lambda p: np.zeros(p.shape, p.dtype), params), core)
    jax.block_until_ready(adamw(params, grads, zeros, zeros))
