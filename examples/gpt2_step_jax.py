"""Training steps of a GPT-2 shaped transformer in plain JAX, from a configuration with random
weights (no download): for sizing with `pjrt-neuron estimate`, not for learning anything.

    pjrt-neuron estimate --unit tokens --per-step 1024 -- python examples/gpt2_step_jax.py

Defaults are GPT-2 small (12 layers, width 768, 12 heads, vocabulary 50257) at batch 8 of 128
tokens; --layers, --width, --heads, --batch, --seq and --steps change them. Runs in float32,
or bfloat16 with --bf16.
"""

import argparse
import math

import jax
import jax.numpy as jnp
import numpy as np


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--bf16", action="store_true")
    return p.parse_args()


def init(rng, args, dtype):
    def dense(n_in, n_out):
        return (rng.standard_normal((n_in, n_out), dtype=np.float32) * 0.02).astype(dtype)

    w = args.width
    layers = [{"qkv": dense(w, 3 * w), "proj": dense(w, w), "fc": dense(w, 4 * w), "out": dense(4 * w, w),
               "ln1": np.ones(w, dtype), "ln2": np.ones(w, dtype)} for _ in range(args.layers)]
    return {"embed": dense(args.vocab, w), "pos": dense(args.seq, w), "layers": layers, "ln_f": np.ones(w, dtype)}


def layer_norm(x, scale):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * scale


def forward(params, tokens, heads):
    b, t = tokens.shape
    x = params["embed"][tokens] + params["pos"][:t]
    mask = jnp.tril(jnp.ones((t, t), bool))
    for layer in params["layers"]:
        h = layer_norm(x, layer["ln1"])
        q, k, v = jnp.split(h @ layer["qkv"], 3, axis=-1)
        split = lambda a: a.reshape(b, t, heads, -1).transpose(0, 2, 1, 3)
        q, k, v = split(q), split(k), split(v)
        scores = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(q.shape[-1])
        attention = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
        x = x + (attention @ v).transpose(0, 2, 1, 3).reshape(b, t, -1) @ layer["proj"]
        h = layer_norm(x, layer["ln2"])
        x = x + jax.nn.gelu(h @ layer["fc"]) @ layer["out"]
    return layer_norm(x, params["ln_f"]) @ params["embed"].T


def loss(params, tokens, heads):
    logits = forward(params, tokens[:, :-1], heads).astype(jnp.float32)
    targets = tokens[:, 1:]
    logp = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()


def main():
    args = parse_args()
    dtype = jnp.bfloat16 if args.bf16 else jnp.float32
    rng = np.random.default_rng(0)
    params = jax.tree.map(jnp.asarray, init(rng, args, dtype))
    tokens = jnp.asarray(rng.integers(0, args.vocab, (args.batch, args.seq + 1), dtype=np.int32))

    @jax.jit
    def step(params, tokens):
        value, grads = jax.value_and_grad(loss)(params, tokens, args.heads)
        return jax.tree.map(lambda p, g: p - 1e-4 * g.astype(p.dtype), params, grads), value

    for i in range(args.steps):
        params, value = step(params, tokens)
        print(f"step {i}: loss {float(value):.4f}", flush=True)


if __name__ == "__main__":
    main()
