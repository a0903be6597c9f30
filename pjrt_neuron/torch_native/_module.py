"""`torch.neuron`: the device module, shaped as `torch.cuda` is for the calls users make."""

from __future__ import annotations

import threading

import torch

from pjrt_neuron.torch_native import _random
from pjrt_neuron.torch_native import _runtime

_current = threading.local()


def is_available() -> bool:
    try:
        return device_count() > 0
    except Exception:
        return False


def is_initialized() -> bool:
    return _runtime.initialized()


def _lazy_init() -> None:
    _runtime.runtime()


def init() -> None:
    _lazy_init()


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    if not _runtime.initialized():
        return _runtime.device_count_without_client()  # asking must not claim the cores
    return len(_runtime.runtime().devices)


def current_device() -> int:
    return getattr(_current, "index", 0)


def _index(device) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        index = device
    else:
        device = torch.device(device)
        if device.type != "neuron":
            raise ValueError(f"expected a neuron device, got {device}")
        index = current_device() if device.index is None else device.index
    _runtime.runtime().device(index)  # refuses a core the process does not have
    return _runtime.runtime().canonical(index)


def set_device(device) -> None:
    _current.index = _index(device)


class device:
    """`with torch.neuron.device(1):` makes neuron:1 the current device inside."""

    def __init__(self, device):
        self.index = _index(device)

    def __enter__(self):
        self.previous = current_device()
        set_device(self.index)

    def __exit__(self, *exc):
        set_device(self.previous)
        return False


def synchronize(device=None) -> None:
    """Waits until the programs launched on the core have run (launches return at once)."""
    _runtime.runtime().synchronize(_index(device))


def get_device_name(device=None) -> str:
    return _runtime.runtime().device(_index(device)).kind


def get_device_properties(device=None) -> dict:
    dev = _runtime.runtime().device(_index(device))
    stats = dev.memory_stats()
    return {"name": dev.kind, "index": _index(device), "total_memory": stats.get("bytes_limit", 0)}


# ----------------------------------------------------------------- memory (the plugin's HBM figures)


def memory_stats(device=None) -> dict:
    stats = _runtime.runtime().memory_stats(_index(device))
    return {
        "allocated_bytes.all.current": stats.get("bytes_in_use", 0),
        "allocated_bytes.all.peak": stats.get("peak_bytes_in_use", 0),
        "reserved_bytes.all.current": stats.get("bytes_reserved", stats.get("bytes_in_use", 0)),
        "reserved_bytes.all.peak": stats.get("peak_bytes_reserved", stats.get("peak_bytes_in_use", 0)),
        "num_alloc_retries": 0,
        "num_ooms": 0,
        "allocation.all.allocated": stats.get("num_allocs", 0),
        "hbm_bytes_limit": stats.get("bytes_limit", 0),
        "largest_alloc_size": stats.get("largest_alloc_size", 0),
    }


_peak_base: dict[int, int] = {}


def memory_allocated(device=None) -> int:
    return _runtime.runtime().memory_stats(_index(device)).get("bytes_in_use", 0)


def max_memory_allocated(device=None) -> int:
    index = _index(device)
    stats = _runtime.runtime().memory_stats(index)
    peak = stats.get("peak_bytes_in_use", 0)
    if index in _peak_base:
        # The plugin's peak is since the client started; after a reset only what came later counts.
        since, at_reset = _peak_base[index]
        return max(stats.get("bytes_in_use", 0), since) if peak <= at_reset else peak
    return peak


def reset_peak_memory_stats(device=None) -> None:
    index = _index(device)
    stats = _runtime.runtime().memory_stats(index)
    _peak_base[index] = (stats.get("bytes_in_use", 0), stats.get("peak_bytes_in_use", 0))


def memory_reserved(device=None) -> int:
    return memory_allocated(device)


def empty_cache() -> None:
    """Frees buffers that only unreachable tensors still hold; the plugin keeps no cache of its own."""
    import gc

    gc.collect()


# ----------------------------------------------------------------- random numbers


def manual_seed(seed: int) -> None:
    _random.manual_seed(seed, current_device())


def manual_seed_all(seed: int) -> None:
    _random.manual_seed_all(seed)


def seed() -> None:
    manual_seed(torch.seed())


def seed_all() -> None:
    manual_seed_all(torch.seed())


def initial_seed() -> int:
    return _random.initial_seed(current_device())


def get_rng_state(device="neuron") -> torch.Tensor:
    return _random.get_state(_index(device))


def set_rng_state(new_state: torch.Tensor, device="neuron") -> None:
    _random.set_state(new_state, _index(device))


def get_amp_supported_dtype() -> list:
    return [torch.bfloat16, torch.float16]
