"""The process's one PJRT client of the plugin for the native `neuron` device: devices, transfers,
programs, HBM figures. Created on first use, not at `import torch`, because a client claims the
process's NeuronCores."""

from __future__ import annotations

import atexit
import ctypes
import threading

import numpy as np
import torch

from pjrt_neuron import config, pjrt_capi

_lock = threading.Lock()
_runtime: "Runtime | None" = None

# Element types a NeuronCore takes, and how they cross to numpy (bf16 through its bits).
_TO_NUMPY = {
    torch.float32: np.float32, torch.float16: np.float16, torch.int32: np.int32,
    torch.int64: np.int64, torch.int16: np.int16, torch.int8: np.int8, torch.uint8: np.uint8,
    torch.bool: np.bool_,
}
SUPPORTED_DTYPES = frozenset(_TO_NUMPY) | {torch.bfloat16}


def check_dtype(dtype: torch.dtype, what: str = "") -> None:
    """Refuses the element types Trainium does not compute in, as the compatibility rules say."""
    if dtype in SUPPORTED_DTYPES:
        return
    where = f" ({what})" if what else ""
    if dtype == torch.float64:
        raise TypeError(f"neuron: float64 is not supported on NeuronCores{where}; NeuronCores compute in "
                        "float32, bfloat16 and float16: convert with .float() before moving the tensor to 'neuron'")
    if dtype.is_complex:
        raise TypeError(f"neuron: complex tensors ({dtype}) are not supported on NeuronCores{where}; keep them on "
                        "the CPU or split them into real and imaginary parts with torch.view_as_real")
    raise TypeError(f"neuron: element type {dtype} is not supported on NeuronCores{where}; supported: "
                    + ", ".join(sorted(str(d).replace("torch.", "") for d in SUPPORTED_DTYPES)))


def _out_of_memory(error: pjrt_capi.PjrtError, index: int) -> BaseException:
    if error.code_name == "RESOURCE_EXHAUSTED":
        return torch.OutOfMemoryError(f"neuron:{index} is out of memory: {error}")
    return RuntimeError(f"neuron:{index}: {error}")


class Runtime:
    def __init__(self):
        config.prepare_environment()
        self.api = pjrt_capi.Api(config.library_path())
        try:
            self.client = pjrt_capi.Client(self.api)
        except pjrt_capi.PjrtError as e:
            raise RuntimeError(f"neuron: the plugin could not open this process's NeuronCores: {e}") from None
        self.devices = self.client.addressable_devices()
        self._compile_options = pjrt_capi.compile_options_proto(compile_portable_executable=True)
        from pjrt_neuron.torch_native._lowering_worker import worker

        worker.start()  # imports torch and torch-mlir while the first ops run

    def device(self, index: int):
        if not 0 <= index < len(self.devices):
            raise RuntimeError(f"neuron:{index} does not exist: this process has {len(self.devices)} NeuronCore(s) "
                               f"(neuron:0 to neuron:{len(self.devices) - 1})")
        return self.devices[index]

    def upload(self, tensor: torch.Tensor, index: int) -> pjrt_capi.Buffer:
        """A dense copy of a CPU tensor in the HBM of NeuronCore `index`."""
        check_dtype(tensor.dtype)
        tensor = tensor.detach().contiguous()
        if tensor.dtype == torch.bfloat16:
            import ml_dtypes

            array = tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        else:
            array = tensor.numpy()
        try:
            return self.client.buffer_from_numpy(array, device=self.device(index))
        except pjrt_capi.PjrtError as e:
            raise _out_of_memory(e, index) from None

    def allocate(self, shape: tuple, dtype: torch.dtype, index: int) -> pjrt_capi.Buffer:
        """An uninitialized buffer, charged to the core's HBM like any other."""
        check_dtype(dtype)
        dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        buffer_type = pjrt_capi.dtype_to_buffer_type(_numpy_dtype(dtype))
        try:
            args = self.api.call("PJRT_Client_CreateUninitializedBuffer", client=self.client.ptr,
                                 shape_dims=dims, shape_num_dims=len(shape),
                                 shape_element_type=int(buffer_type), device=self.device(index))
        except pjrt_capi.PjrtError as e:
            raise _out_of_memory(e, index) from None
        return pjrt_capi.Buffer(self.client, args.buffer)

    def download(self, buffer: pjrt_capi.Buffer, dtype: torch.dtype) -> torch.Tensor:
        array = buffer.to_numpy()
        if dtype == torch.bfloat16:
            return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(array)

    def compile(self, mlir_text: str) -> pjrt_capi.LoadedExecutable:
        return self.client.compile(mlir_text, compile_options=self._compile_options)

    def execute(self, executable, buffers, index: int) -> list:
        try:
            return executable.execute(list(buffers), execute_device=self.device(index))[0]
        except pjrt_capi.PjrtError as e:
            raise _out_of_memory(e, index) from None

    def memory_stats(self, index: int) -> dict:
        return self.device(index).memory_stats()

    def close(self) -> None:
        self.client.close()


def _numpy_dtype(dtype: torch.dtype):
    if dtype == torch.bfloat16:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_TO_NUMPY[dtype])


def runtime() -> Runtime:
    global _runtime
    if _runtime is None:
        with _lock:
            if _runtime is None:
                _runtime = Runtime()
                atexit.register(_close)
    return _runtime


def initialized() -> bool:
    return _runtime is not None


def _close() -> None:
    global _runtime
    if _runtime is not None:
        # Buffers still referenced by tensors are freed with the client.
        _runtime, closing = None, _runtime
        try:
            closing.close()
        except Exception:
            pass
