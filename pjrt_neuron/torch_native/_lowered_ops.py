"""An op as a program: lowered (by the lowering worker) and compiled once per (op, argument
template, shapes, dtypes), then run on the tensors' core; what cannot be lowered runs on the CPU,
when PJRT_NEURON_TORCH_FALLBACK=cpu or inside a backward pass, or is refused naming the op."""

from __future__ import annotations

import functools
import threading
import warnings

import torch

from pjrt_neuron import config
from pjrt_neuron.torch_native import _random
from pjrt_neuron.torch_native._lowering import FloatSlot, Slot, Unsupported
from pjrt_neuron.torch_native._lowering_worker import worker
from pjrt_neuron.torch_native._runtime import check_dtype, runtime
from pjrt_neuron.torch_native._storage import NeuronTensor, assign, value, wrap

_programs: dict = {}
_refusals: dict = {}
_warned_fallbacks: set = set()


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

def run(func, args, kwargs):
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
            return unsupported(func, args, kwargs, refusal)
        entry = _programs[key] = _Entry()
    program = entry.find(floats)
    if program is None:
        try:
            program = _compile(worker.lower(func, args_template, kwargs_template, inputs, _aliased_results(func),
                                            tuple(floats), entry.lifted))
        except Unsupported as e:
            _refusals[key] = str(e)
            del _programs[key]
            return unsupported(func, args, kwargs, str(e))
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


def in_autograd_device_thread() -> bool:
    # PyTorch's Python-defined device guard loses (or, unwinding, aborts on) an exception raised in
    # the autograd engine's thread for the device, so a backward op never raises there.
    return threading.current_thread() is not threading.main_thread() and torch._C._current_graph_task_id() != -1


def unsupported(func, args, kwargs, reason: str, in_backward: bool = False):
    chosen = config._value("PJRT_NEURON_TORCH_FALLBACK") == "cpu"
    if chosen or in_backward or in_autograd_device_thread():
        if func not in _warned_fallbacks:
            _warned_fallbacks.add(func)
            why = ("PJRT_NEURON_TORCH_FALLBACK=cpu" if chosen else
                   "it is part of a backward pass, where an error cannot reach the caller")
            warnings.warn(f"The operator '{func}' is not lowered for the 'neuron' device ({reason}); it runs on "
                          f"the CPU instead ({why}), which copies its tensors through the host.", stacklevel=3)
        return on_cpu(func, args, kwargs)
    raise NotImplementedError(
        f"The operator '{func}' is not implemented for the 'neuron' device: {reason}. "
        "Set PJRT_NEURON_TORCH_FALLBACK=cpu to run such ops on the CPU (slower: their tensors cross the host).")

# ------------------------------------------------------------------ on the CPU

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


def on_cpu(func, args, kwargs, random: bool = False):
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
