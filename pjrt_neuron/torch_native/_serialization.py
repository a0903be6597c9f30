"""torch.save and torch.load of neuron tensors.

A neuron tensor is saved as its elements on the CPU plus its device name (no host storage to point
at), and rebuilt by `rebuild`, which honours `torch.load(map_location=...)`: PyTorch applies
map_location to storages only, and a storage cannot be made on this device without a C++ allocator.
"""

from __future__ import annotations

import functools
import threading

import torch

_loading = threading.local()


def rebuild(cpu: torch.Tensor, device: str, requires_grad: bool) -> torch.Tensor:
    target = getattr(_loading, "device", None)
    tensor = cpu.to(target if target is not None else device)
    if requires_grad:
        tensor.requires_grad_(True)
    return tensor


def _neuron_target(map_location):
    """The device a whole load goes to, when map_location names a neuron device or the CPU."""
    if isinstance(map_location, dict):
        targets = {torch.device(v) for v in map_location.values()}
        return next(iter(targets)) if len(targets) == 1 else None
    if isinstance(map_location, (str, torch.device)):
        return torch.device(map_location)
    return None


def _moved(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj if obj.device == device else obj.to(device)
    if isinstance(obj, dict):
        moved = type(obj)() if type(obj) is not dict else {}
        for key, value in obj.items():
            moved[key] = _moved(value, device)
        if hasattr(obj, "_metadata"):
            moved._metadata = obj._metadata
        return moved
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_moved(v, device) for v in obj)
    return obj


def install() -> None:
    torch.serialization.add_safe_globals([rebuild])
    original = torch.load
    if getattr(original, "_pjrt_neuron", False):
        return

    @functools.wraps(original)
    def load(f, map_location=None, *args, **kwargs):
        target = _neuron_target(map_location)
        if target is None:
            return original(f, map_location, *args, **kwargs)
        _loading.device = target
        try:
            loaded = original(f, "cpu" if target.type == "neuron" else map_location, *args, **kwargs)
        finally:
            _loading.device = None
        return _moved(loaded, target) if target.type == "neuron" else loaded

    load._pjrt_neuron = True
    torch.load = load
