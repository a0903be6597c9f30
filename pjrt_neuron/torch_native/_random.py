"""Random numbers of the `neuron` device: one generator state per NeuronCore, seeded as
`torch.manual_seed` seeds CUDA's. Random ops draw on the host from that state (the CPU's
algorithm), so a seeded neuron run draws what the same seeded CPU run draws."""

from __future__ import annotations

import contextlib
import threading

import torch

_lock = threading.RLock()
_states: dict[int, torch.Tensor] = {}
_seeds: dict[int, int] = {}
_seed_of_all: list[int] = []  # manual_seed_all's seed, for cores not seeded one by one


def _state(index: int) -> torch.Tensor:
    if index not in _states:
        seed = _seeds.get(index, _seed_of_all[0] if _seed_of_all else torch.initial_seed())
        generator = torch.Generator().manual_seed(seed)
        _seeds[index] = seed
        _states[index] = generator.get_state()
    return _states[index]


@contextlib.contextmanager
def device_generator(index: int):
    """CPU random ops inside draw from (and advance) NeuronCore `index`'s generator."""
    with _lock:
        saved = torch.random.default_generator.get_state()
        torch.random.default_generator.set_state(_state(index))
        try:
            yield
        finally:
            _states[index] = torch.random.default_generator.get_state()
            torch.random.default_generator.set_state(saved)


def manual_seed(seed: int, index: int) -> None:
    with _lock:
        _seeds[index] = int(seed)
        _states.pop(index, None)


def manual_seed_all(seed: int) -> None:
    with _lock:
        _seed_of_all[:] = [int(seed)]
        _seeds.clear()
        _states.clear()


def initial_seed(index: int) -> int:
    with _lock:
        _state(index)
        return _seeds[index]


def get_state(index: int) -> torch.Tensor:
    with _lock:
        return _state(index).clone()


def set_state(state: torch.Tensor, index: int) -> None:
    with _lock:
        generator = torch.Generator()
        generator.set_state(state.cpu())  # validates the state's size
        _states[index] = generator.get_state()
