"""Everything checked in one PJRT_DEVICE=NEURON process (torch_xla's import is slow).

Prints one JSON object on the last line: the plugin registry entry, runtime queries,
memory info, device attributes, host<->device and core-to-core transfers, and the
losses of train_mlp.py.
"""

import gc
import json

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from torch_xla.experimental import plugins

from train_mlp import run_training

out = {}

# Which plugin holds the NEURON slot after torch_xla registered the installed entry points.
entry = plugins._plugin_registry.get("NEURON")
out["registry_neuron"] = f"{type(entry).__module__}.{type(entry).__qualname__}"

dev0, dev1 = torch_xla.device(0), torch_xla.device(1)
out["devices"] = [str(d) for d in torch_xla.devices()]
out["dev1"] = str(dev1)
out["queries"] = {
    "device_type": xr.device_type(),
    "global_runtime_device_count": xr.global_runtime_device_count(),
    "addressable_runtime_device_count": xr.addressable_runtime_device_count(),
    "addressable_device_count": xr.addressable_device_count(),
    "global_device_count": xr.global_device_count(),
    "process_index": xr.process_index(),
    "process_count": xr.process_count(),
    "world_size": xr.world_size(),
}
out["attributes"] = {str(d): xr.runtime_device_attributes(str(d)) for d in (dev0, dev1)}
out["all_attributes"] = xr.global_runtime_device_attributes()


def memory(device):
    xm.wait_device_ops()  # execution is asynchronous; let buffers land before counting
    return xm.get_memory_info(device)


out["memory_before"] = {str(d): memory(d) for d in (dev0, dev1)}
big = torch.ones(256, 1024).to(dev0)  # 1 MiB of float32
out["memory_with_1mib_on_dev0"] = {str(d): memory(d) for d in (dev0, dev1)}
big_on_1 = big.to(dev1)
torch_xla.sync()
out["memory_with_1mib_copied_to_dev1"] = {str(d): memory(d) for d in (dev0, dev1)}
out["copy_to_dev1_equal"] = bool(torch.equal(big_on_1.cpu(), torch.ones(256, 1024)))
del big, big_on_1
gc.collect()
out["memory_after_free"] = {str(d): memory(d) for d in (dev0, dev1)}


def samples():
    """Host tensors with edge values for each dtype."""
    f = [0.0, -0.0, 1.0, -2.5, 3.140625, 1e-3, 65504.0, float("inf"), float("-inf"), float("nan")]
    tensors = {
        "float32": torch.tensor(f + [1e-40, 3.4e38], dtype=torch.float32),  # 1e-40: subnormal
        "bfloat16": torch.tensor(f + [1e-40, 3.0e38], dtype=torch.bfloat16),
        "float16": torch.tensor(f + [6e-8, -6e-5], dtype=torch.float16),  # 6e-8: subnormal
        "int64": torch.tensor([0, 1, -1, 2**62 + 12345, 2**63 - 1, -2**63], dtype=torch.int64),
        "int32": torch.tensor([0, 1, -1, 123456789, 2**31 - 1, -2**31], dtype=torch.int32),
        "int8": torch.tensor([0, 1, -1, 127, -128, 42], dtype=torch.int8),
        "uint8": torch.tensor([0, 1, 128, 255, 42], dtype=torch.uint8),
        "bool": torch.tensor([True, False, False, True, True], dtype=torch.bool),
    }
    g = torch.Generator().manual_seed(7)
    # A larger, multi-dimensional tensor per dtype too.
    tensors["float32_3d"] = torch.randn(3, 17, 33, generator=g)
    tensors["bfloat16_3d"] = torch.randn(4, 9, 5, generator=g).to(torch.bfloat16)
    tensors["int64_2d"] = torch.randint(-2**40, 2**40, (31, 7), generator=g)
    tensors["uint8_2d"] = torch.randint(0, 256, (16, 16), generator=g, dtype=torch.uint8)
    return tensors


def same_bits(a, b):
    """Bitwise equality (NaN and -0.0 included) plus matching dtype and shape."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_floating_point():
        view = {4: torch.int32, 2: torch.int16}[a.element_size()]
        return bool(torch.equal(a.view(view), b.view(view)))
    return bool(torch.equal(a, b))


transfers = {}
for name, host in samples().items():
    on0 = host.to(dev0)
    on1 = on0.to(dev1)  # core to core
    direct1 = host.to(dev1)  # host straight to core 1
    transfers[name] = {
        "dev0_roundtrip": same_bits(host, on0.cpu()),
        "dev0_to_dev1": same_bits(host, on1.cpu()),
        "dev1_roundtrip": same_bits(host, direct1.cpu()),
        "dev1_to_dev0": same_bits(host, direct1.to(dev0).cpu()),
        "devices": [str(on0.device), str(on1.device)],
    }
out["transfers"] = transfers

# Compute on core 1 with an operand copied from core 0.
a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
r = (a.to(dev0).to(dev1) * 2 + torch.ones(3, 4, device=dev1)).cpu()
out["compute_on_dev1_equal"] = bool(torch.equal(r, a * 2 + 1))

out["training"] = run_training(dev0)
print(json.dumps(out))
