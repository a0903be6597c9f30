"""PyTorch's device `neuron` on this plugin, for current PyTorch (2.10 and later) without torch-xla.

`import torch` calls `autoload` through the `torch.backends` entry point, which names the
PrivateUse1 backend `neuron`, registers `torch.neuron`, the factory kernels and the
torch.distributed backend of `neuron` tensors, and nothing more:
the plugin's client (which claims NeuronCores) starts at the first tensor on the device.
"""

from __future__ import annotations

import importlib.util
import warnings

MINIMUM_TORCH = (2, 10)
_registered = False


def _torch_version() -> tuple[int, int]:
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def _owner() -> str | None:
    """Why pjrt-neuron leaves the name `neuron` alone, or None when it takes it."""
    from pjrt_neuron import config

    choice = config._value("PJRT_NEURON_TORCH_DEVICE")
    if choice == "off":
        return "PJRT_NEURON_TORCH_DEVICE=off"
    if _torch_version() < MINIMUM_TORCH:
        return f"torch {_torch_version()} is older than 2.10 (use torch-xla's PJRT_DEVICE=NEURON there)"
    if choice == "auto" and importlib.util.find_spec("torch_neuronx") is not None:
        return "AWS's torch-neuronx is installed and owns `neuron` (PJRT_NEURON_TORCH_DEVICE=pjrt-neuron takes it)"
    return None


def autoload() -> None:
    """The `torch.backends` entry point: registers the device unless something else owns it. It runs
    inside `import torch`, so a failure here is a warning, never a broken import."""
    try:
        if _owner() is None:
            register()
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"pjrt-neuron: the `neuron` device was not registered: {type(e).__name__}: {e}")


def register() -> None:
    global _registered
    if _registered:
        return
    import torch
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", "neuron"):
        warnings.warn(f"pjrt-neuron: PyTorch's PrivateUse1 device is already named {current!r}; "
                      "the `neuron` device is not registered")
        return
    from pjrt_neuron.torch_native import _module
    from pjrt_neuron.torch_native._special_ops import factory_empty

    if current == "privateuseone":
        from pjrt_neuron.torch_native import _device_guard, _runtime

        try:
            cores = _runtime.device_count_without_client()
        except Exception:  # noqa: BLE001 - the client names a broken setting when it starts
            cores = 1
        _device_guard.install(cores)  # first: PyTorch's Python guard then stays out
        _setup_privateuseone_for_python_backend("neuron", backend_module=_module)
    library = torch.library.Library("aten", "IMPL")

    def empty_memory_format(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        return factory_empty(size, None, dtype, device if device is not None else _current())

    def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
        return factory_empty(size, stride, dtype, device if device is not None else _current())

    library.impl("empty.memory_format", empty_memory_format, "PrivateUse1")
    library.impl("empty_strided", empty_strided, "PrivateUse1")
    from pjrt_neuron.torch_native._special_ops import HOST_FACTORIES, copy_from, host_factory

    # torch.tensor(..., device="neuron") copies through this op below the Python key.
    library.impl("_copy_from", copy_from, "PrivateUse1")
    for name in HOST_FACTORIES:
        library.impl(name, host_factory(name), "PrivateUse1")
    from pjrt_neuron.torch_native import _autocast

    _autocast.install(library)
    register._library = library  # registrations live as long as the Library object
    from pjrt_neuron.torch_native import _serialization

    _serialization.install()
    from pjrt_neuron.torch_native import _modules

    _modules.install()
    from pjrt_neuron.torch_native import _distributed

    _distributed.register()  # torch.distributed's backend of `neuron` tensors
    from pjrt_neuron.torch_native import _fsdp

    _fsdp.install()
    _registered = True


def _current():
    import torch

    from pjrt_neuron.torch_native import _module

    return torch.device("neuron", _module.current_device())
