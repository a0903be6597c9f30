"""Training steps of a small float32 MLP in torch-xla; jax_mlp.py is the same model in JAX."""

import sys

import torch
import torch_xla

BATCH, IN, HIDDEN, OUT = 64, 32, 128, 16

if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    device = torch_xla.device()
    torch.manual_seed(0)
    x = torch.randn(BATCH, IN).to(device)
    y = torch.randn(BATCH, OUT).to(device)
    model = torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, OUT)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    torch_xla.sync()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        torch_xla.sync()
    print("loss", loss.item())
