"""`model.to("neuron")` keeps tied parameters tied (GPT-2's lm_head and token embedding).

Module._apply swaps a parameter's data in place only between tensors of one kind; a CPU parameter
becoming a neuron tensor is a new Parameter per module that holds it, so two modules sharing one
parameter would each get their own copy and train them apart. After the move, every place that
shared one parameter (or buffer) before it gets the same new one.
"""

from __future__ import annotations

import functools

import torch


def _slots(root: torch.nn.Module):
    for module in root.modules():
        for kind in ("_parameters", "_buffers"):
            for name, value in getattr(module, kind).items():
                if value is not None:
                    yield module, kind, name, value


def install() -> None:
    original = torch.nn.Module._apply
    if getattr(original, "_pjrt_neuron", False):
        return

    @functools.wraps(original)
    def _apply(self, fn, recurse=True):
        if getattr(_apply, "active", False) or not recurse:
            return original(self, fn, recurse)
        before = [(module, kind, name, id(value)) for module, kind, name, value in _slots(self)]
        _apply.active = True
        try:
            result = original(self, fn, recurse)
        finally:
            _apply.active = False
        first: dict[int, object] = {}
        for module, kind, name, old in before:
            new = getattr(module, kind).get(name)
            if new is None:
                continue
            kept = first.setdefault(old, new)
            if kept is not new:
                getattr(module, kind)[name] = kept
        return result

    _apply._pjrt_neuron = True
    torch.nn.Module._apply = _apply
