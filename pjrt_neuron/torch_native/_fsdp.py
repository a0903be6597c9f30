"""FSDP2 (`fully_shard`) on `neuron` tensors.

FSDP2 moves a module's CPU parameters to the device by assigning `.data`, which PyTorch refuses
between a CPU tensor and a neuron tensor (a Python tensor type); they are swapped in instead, as
FSDP2 does for tensor subclasses and `Module.to` does. It frees a gathered parameter between uses by resizing its storage to zero bytes and gives it
memory again before the next all-gather (`free_storage`, `alloc_storage`); a neuron tensor's
storage is the plugin's buffer, not PyTorch's, so those two are taught to drop and re-create the
buffer. Patched when FSDP2's modules are first imported: importing them up front costs ~2 s.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

_PARAM = "torch.distributed.fsdp._fully_shard._fsdp_param"
_INIT = "torch.distributed.fsdp._fully_shard._fsdp_init"


def _patch_init(module) -> None:
    original = module._move_states_to_device
    if getattr(original, "_pjrt_neuron", False):
        return

    def _move_states_to_device(params, buffers, device):
        if device.type != "neuron":
            return original(params, buffers, device)
        import itertools

        import torch

        for tensor in itertools.chain(params, buffers):
            if tensor.device == device or tensor.device.type in ("meta", "neuron"):
                continue  # FSDP2 itself refuses what is on another device type
            with torch.no_grad():
                moved = tensor.to(device)
                if isinstance(tensor, torch.nn.Parameter):
                    moved = torch.nn.Parameter(moved, requires_grad=tensor.requires_grad)
            torch.utils.swap_tensors(tensor, moved)
        return original(params, buffers, device)

    _move_states_to_device._pjrt_neuron = True
    module._move_states_to_device = _move_states_to_device


def _patch_param(module) -> None:
    from pjrt_neuron.torch_native._runtime import runtime
    from pjrt_neuron.torch_native._storage import NeuronTensor

    original_alloc, original_free = module.alloc_storage, module.free_storage
    if getattr(original_alloc, "_pjrt_neuron", False):
        return

    def alloc_storage(tensor):
        if not isinstance(tensor, NeuronTensor):
            return original_alloc(tensor)
        storage = tensor._neuron_storage
        if storage.buffer is None:
            storage.buffer = runtime().allocate(storage.shape, storage.dtype, storage.index)

    def free_storage(tensor):
        if not isinstance(tensor, NeuronTensor):
            return original_free(tensor)
        tensor._neuron_storage.buffer = None  # the HBM goes back to the core now

    alloc_storage._pjrt_neuron = True
    module.alloc_storage, module.free_storage = alloc_storage, free_storage
    group = sys.modules.get("torch.distributed.fsdp._fully_shard._fsdp_param_group")
    if group is not None:  # it imported alloc_storage by name
        group.alloc_storage = alloc_storage


_PATCHES = {_PARAM: _patch_param, _INIT: _patch_init}


class _Finder(importlib.abc.MetaPathFinder):
    """Patches FSDP2's modules right after they are imported."""

    def find_spec(self, name, path=None, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            patch(module)

        loader.exec_module = exec_and_patch
        return spec


def install() -> None:
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
