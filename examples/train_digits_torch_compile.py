"""Train the digits classifier with torch.compile(backend="openxla") on NeuronCores.

The device is chosen outside the script, as for any torch-xla program:

    PJRT_DEVICE=NEURON python examples/train_digits_torch_compile.py
    PJRT_DEVICE=CPU python examples/train_digits_torch_compile.py

Unlike examples/train_digits_torch.py, which traces lazily and syncs at every step, the model's
forward and backward pass here are captured by TorchDynamo and compiled by torch-xla's
openxla backend once. Prints the mean loss per epoch and the test accuracy, and exits with
status 1 if the accuracy is below 0.95.
"""

import argparse
import sys
import time

import numpy as np
import torch
import torch_xla
import torch_xla.runtime as xr
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

ACCURACY_THRESHOLD = 0.95


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
    return (x_train, y_train.astype(np.int64), x_test,
            y_test.astype(np.int64))


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    device = torch_xla.device()
    print(f"device: {device} ({xr.device_type()})", flush=True)

    x_train, y_train, x_test, y_test = load_data(args.seed)
    # Drop the last incomplete batch so every step has the same shape and
    # XLA compiles the training step once.
    steps_per_epoch = len(x_train) // args.batch_size
    if steps_per_epoch == 0:
        print("batch size is larger than the training set", file=sys.stderr)
        return 2

    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 10),
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    # Dynamo captures forward and backward; the optimizer step stays in torch-xla's lazy mode.
    compiled = torch.compile(model, backend="openxla")

    # Batches are sliced on the host and sent with .to(device), as in a usual
    # DataLoader loop.
    x_train_t = torch.from_numpy(x_train)
    y_train_t = torch.from_numpy(y_train)

    for epoch in range(1, args.epochs + 1):
        model.train()
        order = rng.permutation(len(x_train))[:steps_per_epoch * args.batch_size]
        order = torch.from_numpy(order.reshape(steps_per_epoch, args.batch_size))
        # Accumulate on the device; a single .item() per epoch avoids forcing
        # a host sync after every step.
        loss_sum = torch.zeros((), device=device)
        for step in range(steps_per_epoch):
            idx = order[step]
            xb = x_train_t[idx].to(device)
            yb = y_train_t[idx].to(device)
            optimizer.zero_grad()
            loss = loss_fn(compiled(xb), yb)
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach()
            torch_xla.sync()
        mean_loss = loss_sum.item() / steps_per_epoch
        print(f"epoch {epoch}/{args.epochs}  loss {mean_loss:.4f}", flush=True)

    model.eval()
    with torch.no_grad():
        logits = compiled(torch.from_numpy(x_test).to(device))
        predictions = logits.argmax(dim=1).cpu().numpy()
    accuracy = float((predictions == y_test).mean())
    print(f"elapsed: {time.perf_counter() - start:.1f} s")
    print(f"test accuracy: {accuracy:.4f}")
    return 0 if accuracy >= ACCURACY_THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
