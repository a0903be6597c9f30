"""Every ATen op on neuron tensors arrives here (NeuronTensor.__torch_dispatch__, and the factory
kernels registered for the PrivateUse1 key): views share storage, transfers cross the host, random
ops draw from the device's generator, and every other op runs as a program lowered once per
(op, shapes, dtypes, attributes)."""

from __future__ import annotations

import functools
import threading
import warnings

import torch

from pjrt_neuron import config
from pjrt_neuron.torch_native import _lowering, _random
from pjrt_neuron.torch_native._lowering import FloatSlot, Slot, Unsupported, fill
from pjrt_neuron.torch_native._lowering_worker import worker
from pjrt_neuron.torch_native._runtime import check_dtype, runtime
from pjrt_neuron.torch_native._storage import NeuronTensor, assign, empty, storage_of, value, wrap

aten = torch.ops.aten
_programs: dict = {}
_refusals: dict = {}
_warned_fallbacks: set = set()
_warned_narrowing: set = set()


def _describe(obj, tensors: list, floats: list | None = None):
    """An argument with its tensors (and, when `floats` is given, its Python floats) replaced by
    slots, which collect them."""
    if isinstance(obj, torch.Tensor):
        tensors.append(obj)
        return Slot(len(tensors) - 1)
    if floats is not None and type(obj) is float:
        floats.append(obj)
        return FloatSlot(len(floats) - 1)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_describe(v, tensors, floats) for v in obj)
    return obj


def _key_of(obj):
    if isinstance(obj, Slot):
        return (type(obj).__name__, obj.number)
    if isinstance(obj, (list, tuple)):
        return tuple(_key_of(v) for v in obj)
    if isinstance(obj, dict):
        return tuple(sorted((k, _key_of(v)) for k, v in obj.items()))
    return obj


def _float_key(value: float):
    return value if value == value else "nan"


class _Entry:
    """The programs of one (op, shapes, dtypes, attributes): by the values of the floats that are
    compiled in (those not lifted to inputs)."""

    __slots__ = ("lifted", "programs")

    def __init__(self):
        self.lifted = None
        self.programs = {}

    def find(self, floats: list):
        exact = tuple(_float_key(v) for v in floats)
        if self.lifted is not None:
            masked = tuple(None if lift else v for v, lift in zip(exact, self.lifted))
            program = self.programs.get(("masked", masked))
            if program is not None:
                return program
        return self.programs.get(("exact", exact))

    def add(self, program, floats: list) -> None:
        exact = tuple(_float_key(v) for v in floats)
        if self.lifted is None:
            self.lifted = program.lifted
        if program.lifted == self.lifted:
            self.programs[("masked", tuple(None if lift else v for v, lift in zip(exact, self.lifted)))] = program
        else:
            self.programs[("exact", exact)] = program


_scalar_buffers: dict = {}


def _scalar_buffer(value: float, index: int):
    """A 0-d float32 input holding `value`, kept for values that recur."""
    key = (value, index)
    buffer = _scalar_buffers.get(key)
    if buffer is None:
        if len(_scalar_buffers) > 4096:
            _scalar_buffers.clear()
        buffer = _scalar_buffers[key] = runtime().upload(torch.tensor(value, dtype=torch.float32), index)
    return buffer


def _device_index(tensors: list, func) -> int:
    """The one NeuronCore the op runs on; a CPU tensor with dimensions is refused as CUDA does."""
    index, other = None, None
    for t in tensors:
        if isinstance(t, NeuronTensor):
            if index is None:
                index = t.device.index
            elif t.device.index != index:
                other = f"neuron:{t.device.index}"
        elif t.dim() != 0 and other is None:
            other = str(t.device)
    if other is not None and index is not None:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"neuron:{index} and {other}! (when checking arguments for {func})")
    return 0 if index is None else index


def _input_buffer(tensor: torch.Tensor, index: int):
    if isinstance(tensor, NeuronTensor):
        return value(tensor)
    return runtime().upload(tensor, index)  # a CPU scalar, as CUDA ops take them


@functools.lru_cache(maxsize=None)
def _aliased_results(func) -> frozenset:
    return frozenset(i for i, r in enumerate(func._schema.returns)
                     if r.alias_info is not None and r.alias_info.is_write)


def _written_arguments(func, args, kwargs) -> list:
    """The tensors an op writes (in-place `self`, `out=`), in result order."""
    written = []
    for i, argument in enumerate(func._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        if argument.kwarg_only or i >= len(args):
            written.append(kwargs.get(argument.name))
        else:
            written.append(args[i])
    return written


_FAKE = torch._C._TorchDispatchModeKey.FAKE


def dispatch(func, args, kwargs):
    fake_mode = torch._C._get_dispatch_mode(_FAKE)
    if fake_mode is not None:
        return _as_fake(fake_mode, func, args, kwargs)
    if kwargs.get("dtype") == torch.float64:
        kwargs = {**kwargs, "dtype": _narrowed(func)}
    if not _in_autograd_device_thread():
        return _dispatch(func, args, kwargs)
    try:
        return _dispatch(func, args, kwargs)
    except Exception as e:  # noqa: BLE001 (see _in_autograd_device_thread)
        return _unsupported(func, args, kwargs, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}",
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
    special = _SPECIAL.get(func)
    if special is not None:
        return special(func, args, kwargs)
    if func.namespace == "c10d":
        # torch.distributed's collectives: c10d's own kernel hands them to the process group's
        # backend for the device (the `neuron` backend, _distributed).
        return func.redispatch(_PRIVATEUSE1, *args, **kwargs)
    name = func._schema.name
    if name.startswith("aten::_foreach_"):
        return _foreach(func, args, kwargs)
    if name.startswith("aten::_fused_"):
        raise NotImplementedError(
            f"{func} on the 'neuron' device: fused optimizer kernels are CUDA code with no lowering; "
            "create the optimizer without fused=True (the default, or foreach=True, runs on the device)")
    if torch.Tag.nondeterministic_seeded in func.tags:
        return _on_cpu(func, args, kwargs, random=True)
    if func.is_view:
        return _view(func, args, kwargs)
    return _run(func, args, kwargs)


def _run(func, args, kwargs):
    tensors: list = []
    floats: list = []
    args_template = _describe(tuple(args), tensors, floats)
    kwargs_template = {k: _describe(v, tensors, floats) for k, v in kwargs.items()}
    index = _device_index(tensors, func)
    for t in tensors:
        check_dtype(t.dtype, f"an argument of {func}")
    inputs = tuple((tuple(t.shape), t.dtype) for t in tensors)
    key = (func, _key_of(args_template), _key_of(kwargs_template), inputs)
    entry = _programs.get(key)
    if entry is None:
        refusal = _refusals.get(key)
        if refusal is not None:
            return _unsupported(func, args, kwargs, refusal)
        entry = _programs[key] = _Entry()
    program = entry.find(floats)
    if program is None:
        try:
            program = _compile(worker.lower(func, args_template, kwargs_template, inputs, _aliased_results(func),
                                            tuple(floats), entry.lifted))
        except Unsupported as e:
            _refusals[key] = str(e)
            del _programs[key]
            return _unsupported(func, args, kwargs, str(e))
        entry.add(program, floats)
    buffers = [_input_buffer(t, index) for t in tensors]
    buffers += [_scalar_buffer(v, index) for v, lift in zip(floats, program.lifted) if lift]
    outputs = runtime().execute(program.executable, buffers, index)
    for number, buffer in zip(program.written_inputs, outputs[len(outputs) - len(program.written_inputs):]):
        assign(tensors[number], buffer)
    aliased = _aliased_results(func)
    written = _written_arguments(func, args, kwargs) if aliased else ()
    results = []
    for position, slot in enumerate(program.result_slots):
        if position in aliased:
            results.append(written[sorted(aliased).index(position)])
        elif slot is None:
            results.append(None)
        elif isinstance(slot, tuple):
            results.append(slot[1])
        else:
            shape, dtype = program.outputs[slot]
            results.append(wrap(outputs[slot], shape, dtype, index))
    return _shape_results(func, results)


class _Program:
    """A lowered op, compiled: its executable and how its results map back."""

    __slots__ = ("executable", "outputs", "result_slots", "written_inputs", "lifted")

    def __init__(self, executable, lowered):
        self.executable = executable
        self.outputs = lowered.outputs
        self.result_slots = lowered.result_slots
        self.written_inputs = lowered.written_inputs
        self.lifted = lowered.lifted


def _compile(lowered) -> _Program:
    try:
        return _Program(runtime().compile(lowered.text), lowered)
    except Exception as e:
        raise Unsupported(f"the plugin could not compile the lowered program: {e}") from None


def _shape_results(func, results: list):
    returns = func._schema.returns
    if len(returns) == 1:
        if isinstance(returns[0].type, torch.ListType):
            return results
        return results[0]
    return tuple(results)


def _in_autograd_device_thread() -> bool:
    # PyTorch's Python-defined device guard loses (or, unwinding, aborts on) an exception raised in
    # the autograd engine's thread for the device, so a backward op never raises there.
    return threading.current_thread() is not threading.main_thread() and torch._C._current_graph_task_id() != -1


def _unsupported(func, args, kwargs, reason: str, in_backward: bool = False):
    chosen = config._value("PJRT_NEURON_TORCH_FALLBACK") == "cpu"
    if chosen or in_backward or _in_autograd_device_thread():
        if func not in _warned_fallbacks:
            _warned_fallbacks.add(func)
            why = ("PJRT_NEURON_TORCH_FALLBACK=cpu" if chosen else
                   "it is part of a backward pass, where an error cannot reach the caller")
            warnings.warn(f"The operator '{func}' is not lowered for the 'neuron' device ({reason}); it runs on "
                          f"the CPU instead ({why}), which copies its tensors through the host.", stacklevel=3)
        return _on_cpu(func, args, kwargs)
    raise NotImplementedError(
        f"The operator '{func}' is not implemented for the 'neuron' device: {reason}. "
        "Set PJRT_NEURON_TORCH_FALLBACK=cpu to run such ops on the CPU (slower: their tensors cross the host).")


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
        return _unsupported(func, args, kwargs, "no per-tensor op matches this foreach op")
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


# ------------------------------------------------------------------ views


def _meta_alias(tensor: NeuronTensor) -> torch.Tensor:
    storage = storage_of(tensor)
    base = torch.empty(storage.numel, dtype=tensor.dtype, device="meta")
    return base.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())


def _view(func, args, kwargs):
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


def _to_cpu(obj):
    if isinstance(obj, NeuronTensor):
        return runtime().download(value(obj), obj.dtype)
    if isinstance(obj, torch.device) and obj.type == "neuron":
        return torch.device("cpu")
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    return obj


def _on_cpu(func, args, kwargs, random: bool = False):
    """Runs the op on the CPU over copies of its neuron tensors; writes and results come back."""
    tensors: list = []
    _describe((tuple(args), kwargs), tensors)
    index = _device_index(tensors, func)
    cpu_args, cpu_kwargs = _to_cpu(tuple(args)), _to_cpu(kwargs)
    if random:
        with _random.device_generator(index):
            result = func(*cpu_args, **cpu_kwargs)
    else:
        result = func(*cpu_args, **cpu_kwargs)
    originals = _written_arguments(func, args, kwargs)
    copies = _written_arguments(func, cpu_args, cpu_kwargs)
    for original, copy in zip(originals, copies):
        if isinstance(original, NeuronTensor):
            assign(original, runtime().upload(copy, index))

    def back(obj):
        for original, copy in zip(originals, copies):
            if obj is copy:
                return original
        if isinstance(obj, torch.Tensor):
            return wrap(runtime().upload(obj, index), tuple(obj.shape), obj.dtype, index)
        if isinstance(obj, (list, tuple)):
            return type(obj)(back(v) for v in obj)
        return obj

    return back(result)


def _to_copy(func, args, kwargs):
    source = args[0]
    device = kwargs.get("device")
    dtype = kwargs.get("dtype") or source.dtype
    if device is not None and device.type == "neuron":
        device = torch.device("neuron", runtime().canonical(device.index or 0))
    if device is None or (device.type == "neuron" and device.index == source.device.index):
        return _run(func, args, kwargs)
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
            return _run(func, args, kwargs)
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
    return _on_cpu(func, args, kwargs)


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


_SPECIAL = {
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
    aten.set_.source_Tensor: _refuse("neuron tensors cannot take another tensor's storage"),
    aten.set_.source_Storage: _refuse("neuron tensors cannot take another tensor's storage"),
    aten.set_.source_Storage_storage_offset: _refuse("neuron tensors cannot take another tensor's storage"),
}
