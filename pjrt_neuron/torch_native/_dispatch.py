"""Every ATen op on neuron tensors arrives here (NeuronTensor.__torch_dispatch__, and the factory
kernels registered for the PrivateUse1 key): views share storage, transfers cross the host, random
ops draw from the device's generator, and every other op runs as a program lowered once per
(op, shapes, dtypes, attributes)."""

from __future__ import annotations

import functools
import warnings

import torch

from pjrt_neuron.torch_native._lowered_ops import in_autograd_device_thread, on_cpu, run, unsupported
from pjrt_neuron.torch_native._lowered_ops import _programs  # noqa: F401 (the compiled ops; tests count them here)
from pjrt_neuron.torch_native._special_ops import SPECIAL, view
from pjrt_neuron.torch_native._storage import NeuronTensor

_warned_narrowing: set = set()


_FAKE = torch._C._TorchDispatchModeKey.FAKE


def dispatch(func, args, kwargs):
    fake_mode = torch._C._get_dispatch_mode(_FAKE)
    if fake_mode is not None:
        return _as_fake(fake_mode, func, args, kwargs)
    if kwargs.get("dtype") == torch.float64:
        kwargs = {**kwargs, "dtype": _narrowed(func)}
    if not func._schema.returns:  # out= into a list (split_with_sizes_copy.out): PyTorch wants None
        _dispatch(func, args, kwargs)
        return None
    if not in_autograd_device_thread():
        return _dispatch(func, args, kwargs)
    try:
        return _dispatch(func, args, kwargs)
    except Exception as e:  # noqa: BLE001 (see in_autograd_device_thread)
        return unsupported(func, args, kwargs, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}",
                           in_backward=True)


def _as_fake(fake_mode, func, args, kwargs):
    """Under torch.compile's fake tensors, a neuron tensor the traced code holds (a constant it
    made) takes part as a fake tensor of its own sizes, strides and device."""
    from torch.utils._pytree import tree_map

    if func in fake_mode.lift_fns and isinstance(args[0], NeuronTensor):
        # torch.tensor(..., device="neuron") in traced code: a constant of the graph, as on CUDA.
        return fake_mode.fake_tensor_converter.from_real_tensor(fake_mode, args[0], make_constant=True)

    def fake(value):
        return fake_mode.from_tensor(value, static_shapes=True) if isinstance(value, NeuronTensor) else value

    return func(*tree_map(fake, args), **tree_map(fake, kwargs))


def _narrowed(func) -> torch.dtype:
    """float64 that an op asks for (a backward formula's accumulator): computed in float32, as
    NeuronCores do; said once per op."""
    if func not in _warned_narrowing:
        _warned_narrowing.add(func)
        warnings.warn(f"'{func}' asked for float64 on the 'neuron' device, which NeuronCores lack; "
                      "it computes in float32", stacklevel=4)
    return torch.float32


_PRIVATEUSE1 = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)


def _dispatch(func, args, kwargs):
    special = SPECIAL.get(func)
    if special is not None:
        return special(func, args, kwargs)
    if func.namespace == "c10d":
        # torch.distributed's collectives: c10d's own kernel hands them to the process group's
        # backend for the device (the `neuron` backend, _distributed).
        return func.redispatch(_PRIVATEUSE1, *args, **kwargs)
    if func.namespace not in ("aten", "prims") and _has_own_kernel(func):
        # A library's own kernel for PrivateUse1 devices or any device (FSDP2's copy-in and chunk
        # ops, functional collectives): made of aten ops and c10d calls, which come back here.
        return func.redispatch(_PRIVATEUSE1, *args, **kwargs)
    name = func._schema.name
    if name.startswith("aten::_foreach_"):
        return _foreach(func, args, kwargs)
    if name.startswith("aten::_fused_"):
        raise NotImplementedError(
            f"{func} on the 'neuron' device: fused optimizer kernels are CUDA code with no lowering; "
            "create the optimizer without fused=True (the default, or foreach=True, runs on the device)")
    if torch.Tag.nondeterministic_seeded in func.tags:
        return on_cpu(func, args, kwargs, random=True)
    if func.is_view:
        return view(func, args, kwargs)
    return run(func, args, kwargs)


def _has_own_kernel(func) -> bool:
    name = func.name()
    return (torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1")
            or torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeExplicitAutograd"))

# ------------------------------------------------------------------ foreach ops


def _element_type(foreach_type: str, overload: str) -> str:
    if foreach_type == "List[Tensor]":
        return "Tensor"
    if foreach_type == "List[number]" and overload == "ScalarList":
        return "number"
    return foreach_type


@functools.lru_cache(maxsize=None)
def _element_op(func):
    """The per-tensor op a foreach op applies: `_foreach_add_.List` is `add_.Tensor` on each pair."""
    schema = func._schema
    base = schema.name.split("::")[1][len("_foreach_"):]
    wanted = [_element_type(str(a.type), func._overloadname) for a in schema.arguments]
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return None
    for overload in packet.overloads():
        op = getattr(packet, overload)
        arguments = op._schema.arguments
        if len(arguments) >= len(wanted) and all(str(a.type) == w for a, w in zip(arguments, wanted)) \
                and all(a.default_value is not None or a.type.kind() == "OptionalType"
                        for a in arguments[len(wanted):]):
            return op
    return None


def _foreach(func, args, kwargs):
    """Applies the per-tensor op to each element, as PyTorch's own slow path for foreach ops does."""
    op = _element_op(func)
    if op is None:
        return unsupported(func, args, kwargs, "no per-tensor op matches this foreach op")
    arguments = func._schema.arguments
    bound = list(args) + [kwargs.get(a.name, a.default_value) for a in arguments[len(args):]]
    per_element = [i for i, a in enumerate(arguments)
                   if str(a.type) == "List[Tensor]" or (str(a.type) == "List[number]" and func._overloadname == "ScalarList")]
    count = len(bound[per_element[0]])
    results = []
    element_arguments = op._schema.arguments
    for element in range(count):
        values = [bound[i][element] if i in per_element else bound[i] for i in range(len(arguments))]
        positional = tuple(v for v, a in zip(values, element_arguments) if not a.kwarg_only)
        keywords = {a.name: v for v, a in zip(values, element_arguments) if a.kwarg_only}
        results.append(dispatch(op, positional, keywords))
    if not func._schema.returns:
        return None
    return results
