"""Train a small MLP on scikit-learn's handwritten digits with plain JAX.

The platform is chosen outside the script through JAX_PLATFORMS, e.g.

    JAX_PLATFORMS=cpu python examples/train_digits_jax.py

Prints the mean training loss per epoch and the final test accuracy, and
exits with status 1 if the accuracy is below 0.95.
"""

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

ACCURACY_THRESHOLD = 0.95
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def load_data(seed):
    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data, digits.target, test_size=0.25, random_state=seed,
        stratify=digits.target)
    # Fit the scaler on the training split only so no test statistics leak.
    scaler = StandardScaler().fit(x_train)
    x_train = scaler.transform(x_train).astype(np.float32)
    x_test = scaler.transform(x_test).astype(np.float32)
    return (x_train, y_train.astype(np.int32), x_test,
            y_test.astype(np.int32))


def init_linear(key, fan_in, fan_out):
    # Same scheme as torch.nn.Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    bound = 1.0 / np.sqrt(fan_in)
    w_key, b_key = jax.random.split(key)
    w = jax.random.uniform(w_key, (fan_in, fan_out), jnp.float32, -bound, bound)
    b = jax.random.uniform(b_key, (fan_out,), jnp.float32, -bound, bound)
    return {"w": w, "b": b}


def init_params(key):
    k1, k2 = jax.random.split(key)
    return [init_linear(k1, 64, 128), init_linear(k2, 128, 10)]


def forward(params, x):
    hidden = jax.nn.relu(x @ params[0]["w"] + params[0]["b"])
    return hidden @ params[1]["w"] + params[1]["b"]


def loss_fn(params, x, y):
    log_probs = jax.nn.log_softmax(forward(params, x))
    # One-hot instead of a gather keeps the lowering simple for any backend.
    one_hot = jax.nn.one_hot(y, 10, dtype=jnp.float32)
    return -jnp.mean(jnp.sum(one_hot * log_probs, axis=-1))


def make_train_step(lr):
    @jax.jit
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        m, v, t = opt_state
        t = t + 1
        # Hand-written Adam with bias correction.
        m = jax.tree_util.tree_map(lambda m, g: BETA1 * m + (1 - BETA1) * g,
                                   m, grads)
        v = jax.tree_util.tree_map(
            lambda v, g: BETA2 * v + (1 - BETA2) * g * g, v, grads)
        tf = t.astype(jnp.float32)
        step = lr * jnp.sqrt(1 - BETA2 ** tf) / (1 - BETA1 ** tf)
        params = jax.tree_util.tree_map(
            lambda p, m, v: p - step * m / (jnp.sqrt(v) + EPS), params, m, v)
        return params, (m, v, t), loss

    return train_step


@jax.jit
def predict(params, x):
    # argmax as max, then its first index: neuronx-cc compiles no variadic reduce for JAX.
    logits = forward(params, x)
    best = jnp.max(logits, axis=-1, keepdims=True)
    classes = jnp.arange(logits.shape[-1])
    return jnp.min(jnp.where(logits == best, classes, logits.shape[-1]), axis=-1)


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    device = jax.devices()[0]
    print(f"device: {device}  platform: {device.platform}", flush=True)

    x_train, y_train, x_test, y_test = load_data(args.seed)
    # Drop the last incomplete batch so every step has the same shape and the
    # jitted step compiles once.
    steps_per_epoch = len(x_train) // args.batch_size
    if steps_per_epoch == 0:
        print("batch size is larger than the training set", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed)

    params = jax.device_put(init_params(jax.random.PRNGKey(args.seed)), device)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    opt_state = jax.device_put((zeros, zeros, jnp.zeros((), jnp.int32)), device)
    train_step = make_train_step(args.lr)

    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_train))[:steps_per_epoch * args.batch_size]
        batches = order.reshape(steps_per_epoch, args.batch_size)
        losses = []
        for idx in batches:
            xb = jax.device_put(x_train[idx], device)
            yb = jax.device_put(y_train[idx], device)
            params, opt_state, loss = train_step(params, opt_state, xb, yb)
            losses.append(loss)
        # Fetch the losses once per epoch rather than blocking every step.
        mean_loss = float(np.mean(jax.device_get(losses)))
        print(f"epoch {epoch}/{args.epochs}  loss {mean_loss:.4f}", flush=True)

    predictions = np.asarray(predict(params, jax.device_put(x_test, device)))
    accuracy = float((predictions == y_test).mean())
    print(f"elapsed: {time.perf_counter() - start:.1f} s")
    print(f"test accuracy: {accuracy:.4f}")
    return 0 if accuracy >= ACCURACY_THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
