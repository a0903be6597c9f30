"""Train a small MLP on scikit-learn's handwritten digits with current PyTorch on NeuronCores.

An ordinary eager PyTorch training loop; the only Trainium-specific part is the device string,
`device="neuron"` (pjrt-neuron registers it when torch is imported). Run the same script on the
CPU with `--device cpu` to compare:

    python examples/train_digits_native.py                # NeuronCores (simulated off Trainium)
    python examples/train_digits_native.py --device cpu   # the same loop on the CPU
    python examples/train_digits_native.py --compile      # the training step under torch.compile

Prints the mean training loss per epoch and the final test accuracy, and exits with status 1 if
the accuracy is below 0.95.
"""

import argparse
import sys
import time

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

ACCURACY_THRESHOLD = 0.95


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="neuron")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true",
                        help="compile the training step (model and optimizer) with torch.compile; backend "
                             "'neuron' on NeuronCores, PyTorch's default elsewhere")
    parser.add_argument("--min-accuracy", type=float, default=ACCURACY_THRESHOLD,
                        help="exit with status 1 below this test accuracy")
    return parser.parse_args(argv)


def load_data(seed):
    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data, digits.target, test_size=0.25, random_state=seed, stratify=digits.target)
    scaler = StandardScaler().fit(x_train)  # training statistics only
    return (scaler.transform(x_train).astype(np.float32), y_train.astype(np.int64),
            scaler.transform(x_test).astype(np.float32), y_test.astype(np.int64))


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    device = torch.device(args.device)
    print(f"device: {device}", flush=True)

    x_train, y_train, x_test, y_test = load_data(args.seed)
    steps_per_epoch = len(x_train) // args.batch_size
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, 10),
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    x_train_t, y_train_t = torch.from_numpy(x_train), torch.from_numpy(y_train)

    def train_step(xb, yb):
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        return loss.detach()

    if args.compile:
        train_step = torch.compile(train_step, backend="neuron" if device.type == "neuron" else "inductor")

    for epoch in range(1, args.epochs + 1):
        model.train()
        order = rng.permutation(len(x_train))[:steps_per_epoch * args.batch_size]
        order = torch.from_numpy(order.reshape(steps_per_epoch, args.batch_size))
        loss_sum = torch.zeros((), device=device)
        for step in range(steps_per_epoch):
            idx = order[step]
            xb, yb = x_train_t[idx].to(device), y_train_t[idx].to(device)
            loss_sum += train_step(xb, yb)
        print(f"epoch {epoch}/{args.epochs}  loss {loss_sum.item() / steps_per_epoch:.6f}", flush=True)

    model.eval()
    with torch.no_grad():
        predictions = model(torch.from_numpy(x_test).to(device)).argmax(dim=1).cpu().numpy()
    accuracy = float((predictions == y_test).mean())
    print(f"elapsed: {time.perf_counter() - start:.1f} s")
    print(f"test accuracy: {accuracy:.4f}")
    return 0 if accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
