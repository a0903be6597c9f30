"""A few float32 training steps of a small MLP with torch-xla: nothing Trainium rejects or changes."""

import torch
import torch_xla

if __name__ == "__main__":
    device = torch_xla.device()
    torch.manual_seed(0)
    x = torch.randn(32, 8)
    y = torch.sin(x[:, :1])
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = x.to(device), y.to(device)
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses
    print("losses", losses)
