"""Upsampling (F.interpolate, nn.Upsample) and a small UNet step on the XLA device chosen by
PJRT_DEVICE. On NEURON torch-xla lowers these to ResizeNearest/ResizeBilinear custom calls
(and ...Grad), which the plugin serves; on CPU torch-xla lowers them itself.

Prints {"device_type", "cases": {name: {"forward", "grad"}}, "unet_losses", "hlo_targets"} as
JSON on the last line. Run with PJRT_DEVICE=NEURON and PJRT_DEVICE=CPU and compare.
"""

import json
import re

import torch
import torch.nn.functional as F
import torch_xla
import torch_xla.runtime as xr

CASES = {
    "nearest_x2": dict(scale_factor=2, mode="nearest"),
    "nearest_to_5x7": dict(size=(5, 7), mode="nearest"),
    "bilinear_x2": dict(scale_factor=2, mode="bilinear", align_corners=False),
    "bilinear_x2_align": dict(scale_factor=2, mode="bilinear", align_corners=True),
    "bilinear_to_5x7": dict(size=(5, 7), mode="bilinear", align_corners=False),
    "bilinear_to_5x7_align": dict(size=(5, 7), mode="bilinear", align_corners=True),
    "bilinear_down_to_2x3": dict(size=(2, 3), mode="bilinear", align_corners=False),
}


def run_case(device, kwargs, targets):
    g = torch.Generator().manual_seed(7)
    x_host = torch.randn(2, 3, 3, 4, generator=g)
    x = x_host.to(device).requires_grad_(True)
    y = F.interpolate(x, **kwargs)
    weights = torch.randn(y.shape, generator=g).to(device)
    (grad,) = torch.autograd.grad((y * weights).sum(), x)
    targets.update(re.findall(r'custom_call_target="(\w+)"', torch_xla._XLAC._get_xla_tensors_hlo([y, grad])))
    torch_xla.sync()
    return {"forward": y.cpu().tolist(), "grad": grad.cpu().tolist()}


class TinyUNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.down = torch.nn.Conv2d(2, 4, 3, stride=2, padding=1)
        self.mid = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.up_nearest = torch.nn.Upsample(scale_factor=2, mode="nearest")
        self.up_bilinear = torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.out = torch.nn.Conv2d(2 + 8, 1, 3, padding=1)

    def forward(self, x):
        h = torch.relu(self.mid(torch.relu(self.down(x))))
        return self.out(torch.cat([x, self.up_nearest(h), self.up_bilinear(h)], dim=1))


def unet_losses(device, targets, steps=3):
    torch.manual_seed(0)
    model = TinyUNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 2, 8, 8, generator=g).to(device)
    target = torch.randn(2, 1, 8, 8, generator=g).to(device)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), target)
        loss.backward()
        targets.update(re.findall(r'custom_call_target="(\w+)"',
                                  torch_xla._XLAC._get_xla_tensors_hlo([p.grad for p in model.parameters()])))
        optimizer.step()
        torch_xla.sync()
        losses.append(loss.item())
    return losses


def main():
    device = torch_xla.device()
    targets = set()
    out = {"device_type": xr.device_type(),
           "cases": {name: run_case(device, kwargs, targets) for name, kwargs in CASES.items()}}
    out["unet_losses"] = unet_losses(device, targets)
    out["hlo_targets"] = sorted(targets)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
