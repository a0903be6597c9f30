"""Train the digits classifier, a PyTorch module, on NeuronCores without torch-xla: torchax.

torchax runs PyTorch on JAX, so the platform is JAX's, chosen outside the script:

    JAX_PLATFORMS=neuron python examples/train_digits_torchax.py
    JAX_PLATFORMS=cpu python examples/train_digits_torchax.py

The model is an ordinary torch.nn.Module. torchax turns it into a JAX function of its
weights; the training step (Adam on the cross-entropy) is that function under jax.grad and
jax.jit, the functional style torchax trains in. Prints the mean loss per epoch and the test
accuracy, and exits with status 1 if the accuracy is below 0.95.
"""

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torchax
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
        digits.data, digits.target, test_size=0.25, random_state=seed, stratify=digits.target)
    scaler = StandardScaler().fit(x_train)
    return (scaler.transform(x_train).astype(np.float32), y_train.astype(np.int32),
            scaler.transform(x_test).astype(np.float32), y_test.astype(np.int32))


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    device = jax.devices()[0]
    print(f"device: {device}  platform: {device.platform}", flush=True)

    x_train, y_train, x_test, y_test = load_data(args.seed)
    steps_per_epoch = len(x_train) // args.batch_size
    if steps_per_epoch == 0:
        print("batch size is larger than the training set", file=sys.stderr)
        return 2

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    weights, forward = torchax.extract_jax(model)

    def loss_fn(w, xb, yb):
        logits = forward(w, (xb,))
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), yb[:, None], axis=1).mean()

    @jax.jit
    def train_step(w, m, v, t, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(w, xb, yb)
        m = jax.tree_util.tree_map(lambda a, g: BETA1 * a + (1 - BETA1) * g, m, grads)
        v = jax.tree_util.tree_map(lambda a, g: BETA2 * a + (1 - BETA2) * g * g, v, grads)
        step_size = args.lr * jnp.sqrt(1 - BETA2 ** t) / (1 - BETA1 ** t)
        w = jax.tree_util.tree_map(lambda p, a, b: p - step_size * a / (jnp.sqrt(b) + EPS), w, m, v)
        return w, m, v, loss

    m = jax.tree_util.tree_map(jnp.zeros_like, weights)
    v = jax.tree_util.tree_map(jnp.zeros_like, weights)
    t = 0
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_train))[:steps_per_epoch * args.batch_size]
        losses = []
        for idx in order.reshape(steps_per_epoch, args.batch_size):
            t += 1
            weights, m, v, loss = train_step(weights, m, v, jnp.float32(t), x_train[idx], y_train[idx])
            losses.append(loss)
        print(f"epoch {epoch}/{args.epochs}  loss {float(jnp.mean(jnp.stack(losses))):.4f}", flush=True)

    predictions = np.asarray(jax.jit(forward)(weights, (x_test,))).argmax(axis=1)
    accuracy = float((predictions == y_test).mean())
    print(f"elapsed: {time.perf_counter() - start:.1f} s")
    print(f"test accuracy: {accuracy:.4f}")
    return 0 if accuracy >= ACCURACY_THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
