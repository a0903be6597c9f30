"""Neuron tensors: PyTorch's view of memory (sizes, strides, an offset into a storage) over
immutable PJRT buffers. A storage holds one buffer with all of its elements; a write replaces the
buffer, so every tensor viewing that storage sees it, as views of CUDA memory do."""

from __future__ import annotations

import math

import torch

from pjrt_neuron.torch_native import _programs
from pjrt_neuron.torch_native._runtime import runtime


class Storage:
    """The elements behind one or more tensors: `buffer` has dims `shape` (numel elements)."""

    __slots__ = ("index", "dtype", "numel", "buffer", "shape")

    def __init__(self, index: int, dtype: torch.dtype, buffer, shape: tuple):
        self.index = index
        self.dtype = dtype
        self.buffer = buffer
        self.shape = tuple(shape)
        self.numel = math.prod(self.shape)


def contiguous_strides(size) -> tuple:
    strides, step = [], 1
    for extent in reversed(tuple(size)):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def _is_dense(size, stride, offset, storage: Storage) -> bool:
    """The tensor is the whole storage in row-major order."""
    if offset != 0 or math.prod(size) != storage.numel:
        return False
    return all(st == want for st, want, n in zip(stride, contiguous_strides(size), size) if n > 1)


class NeuronTensor(torch.Tensor):
    """A tensor on device `neuron:<index>`; its elements live in the plugin's buffers."""

    _neuron_storage: Storage

    @staticmethod
    def __new__(cls, storage: Storage, size, stride=None, offset: int = 0):
        size = tuple(size)
        stride = contiguous_strides(size) if stride is None else tuple(stride)
        tensor = torch.Tensor._make_wrapper_subclass(
            cls, size, strides=stride, storage_offset=offset, dtype=storage.dtype,
            device=torch.device("neuron", storage.index), requires_grad=False)
        tensor._neuron_storage = storage
        return tensor

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        from pjrt_neuron.torch_native import _dispatch

        return _dispatch.dispatch(func, args, kwargs or {})

    def __repr__(self, *, tensor_contents=None):
        with torch.no_grad():
            text = repr(self.cpu())
        suffix = f", device='{self.device}'"
        if self.grad_fn is not None:
            suffix += f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            suffix += ", requires_grad=True"
        head, _, _ = text.partition(", requires_grad=True")
        head = head.rsplit(")", 1)[0] if head.endswith(")") else head
        return head + suffix + ")"

    def __reduce_ex__(self, protocol):
        # Saved as PyTorch saves tensors of devices without host storage: the elements as a CPU
        # tensor and the device by name, rebuilt with .to(device); the storage is not state.
        from pjrt_neuron.torch_native._serialization import rebuild

        return (rebuild, (self.detach().cpu(), str(self.device), self.requires_grad))

    def __coerce_same_metadata_as_tangent__(self, expected_metadata, expected_type=None):
        # AOT Autograd (torch.compile) expects plain tensors as gradients; a neuron tensor is one.
        return self

    def numpy(self, *, force: bool = False):
        if not force:
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. "
                            "Use Tensor.cpu() to copy the tensor to host memory first.")
        return self.cpu().numpy()

    def tolist(self):
        # PyTorch refuses tolist() on any tensor subclass; on CUDA it copies to the host, as here.
        return self.cpu().tolist()


def storage_of(tensor: NeuronTensor) -> Storage:
    return tensor._neuron_storage


def wrap(buffer, shape, dtype: torch.dtype, index: int) -> NeuronTensor:
    """A new tensor owning a new storage: `buffer` (dims `shape`)."""
    return NeuronTensor(Storage(index, dtype, buffer, shape), shape)


def empty(size, stride, dtype: torch.dtype, index: int) -> NeuronTensor:
    size, stride = tuple(size), tuple(stride)
    numel = 1 + sum((n - 1) * st for n, st in zip(size, stride)) if all(size) else 0
    if numel == math.prod(size) and stride == contiguous_strides(size):
        shape = size
    else:
        shape = (numel,)
    buffer = runtime().allocate(shape, dtype, index)
    return NeuronTensor(Storage(index, dtype, buffer, shape), size, stride, 0)


def value(tensor: NeuronTensor):
    """A buffer with the tensor's elements, dims `tensor.shape`: the storage's own buffer when the
    tensor is all of it, else a read through a view program."""
    storage = tensor._neuron_storage
    size, stride, offset = tuple(tensor.shape), tensor.stride(), tensor.storage_offset()
    if _is_dense(size, stride, offset, storage):
        if storage.shape == size:
            return storage.buffer
        program = _programs.reshape(storage.shape, size, storage.dtype)
    else:
        program = _programs.read_view(storage.shape, size, stride, offset, storage.dtype)
    return runtime().execute(program, [storage.buffer], storage.index)[0]


def assign(tensor: NeuronTensor, buffer) -> None:
    """Writes `buffer` (dims `tensor.shape`) into the elements the tensor views."""
    storage = tensor._neuron_storage
    size, stride, offset = tuple(tensor.shape), tensor.stride(), tensor.storage_offset()
    if _is_dense(size, stride, offset, storage):
        storage.buffer, storage.shape = buffer, size
        return
    program = _programs.write_view(storage.shape, size, stride, offset, storage.dtype)
    storage.buffer = runtime().execute(program, [storage.buffer, buffer], storage.index)[0]
