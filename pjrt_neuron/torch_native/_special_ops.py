"""The ops a program does not run: views over the same storage, copies across the host, reading
a scalar, factories (empty, and those made on the host), and the few refused; SPECIAL maps each
to its kernel."""

from __future__ import annotations

import torch

from pjrt_neuron.torch_native import _lowering, _random
from pjrt_neuron.torch_native._lowered_ops import _describe, on_cpu, run
from pjrt_neuron.torch_native._lowering import fill
from pjrt_neuron.torch_native._runtime import check_dtype, runtime
from pjrt_neuron.torch_native._storage import NeuronTensor, assign, empty, storage_of, value, wrap

aten = torch.ops.aten


# ------------------------------------------------------------------ views


def _meta_alias(tensor: NeuronTensor) -> torch.Tensor:
    storage = storage_of(tensor)
    base = torch.empty(storage.numel, dtype=tensor.dtype, device="meta")
    return base.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())


def view(func, args, kwargs):
    tensors: list = []
    args_template = _describe(tuple(args), tensors)
    kwargs_template = {k: _describe(v, tensors) for k, v in kwargs.items()}
    base = next((t for t in tensors if isinstance(t, NeuronTensor)), None)
    metas = [_meta_alias(t) if isinstance(t, NeuronTensor) else t.to("meta") for t in tensors]
    result = func(*fill(_lowering._meta_device(args_template), metas),
                  **fill(_lowering._meta_device(kwargs_template), metas))

    def rewrap(meta):
        if isinstance(meta, (list, tuple)):
            return type(meta)(rewrap(m) for m in meta)
        if not isinstance(meta, torch.Tensor):
            return meta
        if meta.dtype != base.dtype:
            raise NotImplementedError(f"{func} on the 'neuron' device: reinterpreting {base.dtype} elements as "
                                      f"{meta.dtype} is not supported; use .to({meta.dtype}) to convert them")
        return NeuronTensor(storage_of(base), meta.shape, meta.stride(), meta.storage_offset())

    return rewrap(result)

# ------------------------------------------------------------------ the host

def _to_copy(func, args, kwargs):
    source = args[0]
    device = kwargs.get("device")
    dtype = kwargs.get("dtype") or source.dtype
    if device is not None and device.type == "neuron":
        device = torch.device("neuron", runtime().canonical(device.index or 0))
    if device is None or (device.type == "neuron" and device.index == source.device.index):
        return run(func, args, kwargs)
    cpu = runtime().download(value(source), source.dtype).to(dtype)
    if device.type == "cpu":
        return cpu
    if device.type == "neuron":
        return _upload(cpu, device.index or 0)
    raise RuntimeError(f"neuron: copying a neuron tensor to {device} directly is not supported; "
                       f"copy it to the CPU first (.cpu()), then to {device}")


def _upload(cpu: torch.Tensor, index: int) -> NeuronTensor:
    check_dtype(cpu.dtype)
    return wrap(runtime().upload(cpu, index), tuple(cpu.shape), cpu.dtype, index)


def _copy_(func, args, kwargs):
    target, source = args[0], args[1]
    if isinstance(target, NeuronTensor):
        if isinstance(source, NeuronTensor) and source.device == target.device:
            return run(func, args, kwargs)
        if isinstance(source, NeuronTensor):
            source = runtime().download(value(source), source.dtype)
        check_dtype(source.dtype, "the source of a copy to a neuron tensor")
        host = source.to(target.dtype).expand(target.shape).contiguous()
        assign(target, runtime().upload(host, target.device.index))
        return target
    target.copy_(runtime().download(value(source), source.dtype))
    return target


def copy_from(source, target, non_blocking=False):
    """The PrivateUse1 kernel of `_copy_from(self, dst)`: a copy of `source` into `target`."""
    return _copy_(aten.copy_.default, (target, source), {})


def _local_scalar_dense(func, args, kwargs):
    tensor = args[0]
    return runtime().download(value(tensor), tensor.dtype).item()


def _empty_like(func, args, kwargs):
    meta = func(*_lowering._meta_device(tuple(_meta_alias(a) if isinstance(a, NeuronTensor) else a for a in args)),
                **_lowering._meta_device(kwargs))
    device = kwargs.get("device")
    index = args[0].device.index if device is None or device.index is None else runtime().canonical(device.index)
    return empty(meta.shape, meta.stride(), meta.dtype, index)


def factory_empty(size, stride=None, dtype=None, device=None):
    """The PrivateUse1 kernel of `empty`: an uninitialized buffer on the core."""
    dtype = dtype or torch.get_default_dtype()
    check_dtype(dtype)
    if device is None or device.index is None:
        from pjrt_neuron.torch_native._module import current_device

        index = current_device()
    else:
        index = runtime().canonical(device.index)
    size = tuple(size)
    stride = tuple(stride) if stride is not None else None
    from pjrt_neuron.torch_native._storage import contiguous_strides

    return empty(size, stride or contiguous_strides(size), dtype, index)


# Factories that fill a tensor through an `out=` op, which resizes it: a neuron tensor keeps the
# size it was made with, so these are made on the host and moved.
HOST_FACTORIES = ("arange", "arange.start", "arange.start_step", "linspace", "logspace", "eye", "eye.m",
                  "range", "range.step", "randperm", "randperm.generator", "tril_indices", "triu_indices")


def host_factory(name: str):
    packet_name, _, overload = name.partition(".")
    op = getattr(getattr(aten, packet_name), overload or "default")

    def kernel(*args, **kwargs):
        device = kwargs.get("device")
        index = runtime().canonical(device.index) if device is not None and device.index is not None else _current_index()
        kwargs = {**kwargs, "device": torch.device("cpu")}
        if torch.Tag.nondeterministic_seeded in op.tags:
            with _random.device_generator(index):
                host = op(*args, **kwargs)
        else:
            host = op(*args, **kwargs)
        return _upload(host, index)

    return kernel


def _current_index() -> int:
    from pjrt_neuron.torch_native._module import current_device

    return current_device()


def _refuse(message):
    def handler(func, args, kwargs):
        raise NotImplementedError(f"{func} on the 'neuron' device: {message}")
    return handler


def _resize_(func, args, kwargs):
    tensor, size = args[0], tuple(args[1])
    if tuple(tensor.shape) == size:
        return tensor
    raise NotImplementedError(f"{func} on the 'neuron' device: neuron tensors keep their size "
                              f"({tuple(tensor.shape)} to {size}); allocate a new tensor instead")


def _is_pinned(func, args, kwargs):
    return False


def _equal(func, args, kwargs):
    return on_cpu(func, args, kwargs)


def _as_strided_(func, args, kwargs):
    """Restrides the tensor over its storage (Dynamo's input cloning does this): only sizes,
    strides and offset change, which ATen's CPU kernel does for any tensor, checked against the
    storage's bounds."""
    tensor = args[0]
    func.redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.CPU), *args, **kwargs)
    if tensor.storage_offset() + _span(tensor) > storage_of(tensor).numel:
        raise RuntimeError(f"{func}: the new view reaches past the tensor's storage")
    return tensor


def _span(tensor) -> int:
    return 1 + sum((n - 1) * st for n, st in zip(tensor.shape, tensor.stride())) if tensor.numel() else 0


SPECIAL = {
    aten.as_strided_.default: _as_strided_,
    aten._to_copy.default: _to_copy,
    aten.copy_.default: _copy_,
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.empty_like.default: _empty_like,
    aten.new_empty.default: _empty_like,
    aten.new_empty_strided.default: _empty_like,
    aten.resize_.default: _resize_,
    aten.is_pinned.default: _is_pinned,
    aten.equal.default: _equal,
    # One queue per core, and a buffer lives until its last reader's launch has completed.
    aten.record_stream.default: lambda func, args, kwargs: None,
    aten.set_.source_Tensor: _refuse("neuron tensors cannot take another tensor's storage"),
    aten.set_.source_Storage: _refuse("neuron tensors cannot take another tensor's storage"),
    aten.set_.source_Storage_storage_offset: _refuse("neuron tensors cannot take another tensor's storage"),
}
