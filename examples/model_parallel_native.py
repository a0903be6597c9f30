"""Model parallelism over two NeuronCores in one process, with current PyTorch.

The first half of an MLP lives on `neuron:0`, the second on `neuron:1`; activations cross between
the cores in forward, their gradients cross back in backward, and each core's optimizer updates
its own half. Written as for two CUDA devices; only the device strings differ:

    python examples/model_parallel_native.py                          # neuron:0 and neuron:1
    python examples/model_parallel_native.py --devices cpu cpu        # the same loop on the CPU

Trains on scikit-learn's handwritten digits; prints the loss every epoch and the test accuracy,
and exits with status 1 if the accuracy is below 0.95.
"""

import argparse
import sys

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler


class TwoStageMLP(torch.nn.Module):
    def __init__(self, first: torch.device, second: torch.device):
        super().__init__()
        self.first, self.second = first, second
        self.stage1 = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU()).to(first)
        self.stage2 = torch.nn.Sequential(torch.nn.Linear(128, 64), torch.nn.ReLU(),
                                          torch.nn.Linear(64, 10)).to(second)

    def forward(self, x):
        return self.stage2(self.stage1(x.to(self.first)).to(self.second))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", nargs=2, default=["neuron:0", "neuron:1"])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-accuracy", type=float, default=0.95)
    args = parser.parse_args(argv)
    first, second = (torch.device(d) for d in args.devices)

    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data, digits.target, test_size=0.25, random_state=args.seed, stratify=digits.target)
    scaler = StandardScaler().fit(x_train)
    x_train = torch.tensor(scaler.transform(x_train), dtype=torch.float32)
    x_test = torch.tensor(scaler.transform(x_test), dtype=torch.float32)
    y_train, y_test = torch.tensor(y_train), torch.tensor(y_test)

    torch.manual_seed(args.seed)
    model = TwoStageMLP(first, second)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    order = np.random.default_rng(args.seed)
    print(f"devices: {first} (stage 1), {second} (stage 2)", flush=True)
    for epoch in range(args.epochs):
        permutation = torch.from_numpy(order.permutation(len(x_train)))
        total = torch.zeros((), device=second)
        for start in range(0, len(x_train), args.batch_size):
            batch = permutation[start:start + args.batch_size]
            loss = torch.nn.functional.cross_entropy(model(x_train[batch]), y_train[batch].to(second))
            optimizer.zero_grad()
            loss.backward()  # gradients flow from neuron:1 back to neuron:0
            optimizer.step()
            total += loss.detach() * len(batch)
        print(f"epoch {epoch + 1:2d}  loss {total.item() / len(x_train):.6f}", flush=True)
    with torch.no_grad():
        predicted = model(x_test).argmax(dim=1).cpu()
    accuracy = (predicted == y_test).float().mean().item()
    print(f"test accuracy {accuracy:.4f}")
    return 0 if accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
