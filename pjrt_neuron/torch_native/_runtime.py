"""The process's one PJRT client of the plugin for the native `neuron` device: devices, transfers,
programs, HBM figures. Created on first use, not at `import torch`, because a client claims the
process's NeuronCores."""

from __future__ import annotations

import atexit
import ctypes
import os
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


def join_launcher_job() -> bool:
    """Under torchrun (RANK, WORLD_SIZE, LOCAL_RANK), makes this process one process of the plugin's
    multi-process job, driving NeuronCore LOCAL_RANK of the instance, as torch-xla's Neuron set-up
    does; what the user or a launcher already set stays. True when the process is in such a job."""
    env = os.environ
    if "NEURON_PJRT_WORLD_SIZE" in env or "NEURON_PJRT_PROCESSES_NUM_DEVICES" in env:
        return True
    try:
        world, rank, local_rank = int(env["WORLD_SIZE"]), int(env["RANK"]), int(env["LOCAL_RANK"])
    except (KeyError, ValueError):
        return False
    if world <= 1:
        return False
    env["NEURON_PJRT_WORLD_SIZE"] = str(world)
    env["NEURON_PJRT_PROCESS_INDEX"] = str(rank)
    if "NEURON_RT_VISIBLE_CORES" not in env and "NEURON_RT_NUM_CORES" not in env:
        env["NEURON_RT_VISIBLE_CORES"] = str(local_rank)
    return True


def _core_count(cores: str) -> int:
    count = 0
    for part in cores.split(","):
        first, _, last = part.strip().partition("-")
        count += int(last) - int(first) + 1 if last else 1
    return count


def device_count_without_client() -> int:
    """How many `neuron` devices the process will have, from the settings alone: creating the client
    would claim the cores, and a launcher (torchrun's agent) asks before its ranks start."""
    env = os.environ
    try:
        if "NEURON_PJRT_PROCESSES_NUM_DEVICES" in env:
            counts = [int(n) for n in env["NEURON_PJRT_PROCESSES_NUM_DEVICES"].split(",")]
            return counts[int(env.get("NEURON_PJRT_PROCESS_INDEX", "0"))]
        own = None
        if env.get("NEURON_RT_VISIBLE_CORES"):
            own = _core_count(env["NEURON_RT_VISIBLE_CORES"])
        elif env.get("NEURON_RT_NUM_CORES"):
            own = int(env["NEURON_RT_NUM_CORES"])
        world = int(env.get("NEURON_PJRT_WORLD_SIZE") or env.get("WORLD_SIZE") or 1)
        if world > 1 and ("NEURON_PJRT_WORLD_SIZE" in env or "LOCAL_RANK" in env):
            return own or 1  # a rank of a job: its own cores
        if own is not None:
            return own
    except ValueError:
        pass  # the plugin names a bad setting when the client starts
    from pjrt_neuron import _native, instance

    report = _native.engine_report()
    if report.get("engine") == "neuron" and report.get("total_cores"):
        return int(report["total_cores"])
    return int(instance.describe()["total_cores"])


class Runtime:
    def __init__(self):
        config.prepare_environment()
        in_job = join_launcher_job()
        self.api = pjrt_capi.Api(config.library_path())
        try:
            self.client = pjrt_capi.Client(self.api)
        except pjrt_capi.PjrtError as e:
            job = (f" (rank {os.environ.get('NEURON_PJRT_PROCESS_INDEX')} of a job of "
                   f"{os.environ.get('NEURON_PJRT_WORLD_SIZE')} processes)") if in_job else ""
            raise RuntimeError(f"neuron: the plugin could not open this process's NeuronCores{job}: {e}") from None
        # `neuron:i` is the process's i-th NeuronCore, in a job too (as torch-xla's `xla:0` is each
        # rank's own device): PyTorch's autograd engine runs a Python-registered device's backward
        # only on index 0. In a job, `neuron:<the core's place in the job>` (neuron:LOCAL_RANK
        # under torchrun) names the same core (`aliases`), so scripts written for CUDA run unchanged.
        self.job_devices = self.client.devices()
        self.devices = self.client.addressable_devices()
        self.process_index = self.client.process_index
        own = {d.id: i for i, d in enumerate(self.devices)}
        self.aliases = {place: own[d.id] for place, d in enumerate(self.job_devices)
                        if d.id in own and place >= len(self.devices)}
        # A process of a multi-process job compiles its programs for its own core (the plugin places
        # a program given no place there; it refuses a portable one in a job), else portable ones
        # that run on whichever of the process's cores the op's tensors are on.
        self._own_core_only = len(self.devices) == 1 and len(self.job_devices) > 1
        self._compile_options = pjrt_capi.compile_options_proto(compile_portable_executable=not self._own_core_only)
        # The completion event of each core's last launch: holding it, not an output, frees outputs on time.
        self.last_launch: dict[int, pjrt_capi.Event] = {}
        from pjrt_neuron.torch_native._lowering_worker import worker

        worker.start()  # imports torch and torch-mlir while the first ops run

    def device(self, index: int):
        index = self.aliases.get(index, index)
        if not 0 <= index < len(self.devices):
            raise RuntimeError(f"neuron:{index} does not exist: this process has {len(self.devices)} NeuronCore(s) "
                               f"(neuron:0 to neuron:{len(self.devices) - 1})")
        return self.devices[index]

    def canonical(self, index: int) -> int:
        """The process's own index of the core a user's `neuron:index` names (see `aliases`)."""
        return self.aliases.get(index, index)

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

    def compile(self, mlir_text: str, num_replicas: int = 1) -> pjrt_capi.LoadedExecutable:
        if num_replicas == 1:
            return self.client.compile(mlir_text, compile_options=self._compile_options)
        # A program of every process of the job (a collective): replica r runs on process r's core.
        options = pjrt_capi.compile_options_proto(num_replicas=num_replicas)
        return self.client.compile(mlir_text, compile_options=options)

    def execute(self, executable, buffers, index: int) -> list:
        """Launches and returns the outputs at once: they become ready when the program has run, and
        whatever reads them (a later program, a download) waits for that, as CUDA's stream order does."""
        launcher = executable.__dict__.get("_launcher")
        if launcher is None:
            launcher = executable._launcher = _Launcher(self, executable)
        device = self.device(index)
        try:
            outputs, completion = launcher(buffers, None if self._own_core_only else device)
        except pjrt_capi.PjrtError as e:
            raise _out_of_memory(e, index) from None
        self.last_launch[index] = completion  # the one it replaces is destroyed when dropped
        return outputs

    def execute_collective(self, executable, buffers, index: int) -> tuple[list, pjrt_capi.Event]:
        """Launches this process's replica of a program of the whole job (its own core's part); it
        runs when every process has launched its part. Returns the outputs and the completion."""
        launcher = executable.__dict__.get("_launcher")
        if launcher is None:
            launcher = executable._launcher = _Launcher(self, executable)
        outputs, completion = launcher(buffers, None)
        self.last_launch[index] = completion
        return outputs, completion

    def synchronize(self, index: int) -> None:
        """Waits for the core's programs: a core runs them in launch order, so for the last one."""
        last = self.last_launch.get(index)
        if last is not None and last.alive:
            try:
                last.await_()
            except pjrt_capi.PjrtError as e:
                raise RuntimeError(f"neuron:{index}: a program failed: {e}") from None

    def memory_stats(self, index: int) -> dict:
        return self.device(index).memory_stats()

    def close(self) -> None:
        self.client.close()


class _Launcher:
    """PJRT_LoadedExecutable_Execute for one executable, its argument structs built once: the per-op
    path of eager mode, so it makes one C call and no Python objects it does not return."""

    def __init__(self, runtime: Runtime, executable):
        structs = pjrt_capi.STRUCTS
        self.runtime = runtime
        self.num_outputs = executable.num_outputs
        self.lock = threading.Lock()
        self.options = structs["PJRT_ExecuteOptions"]()
        self.options.struct_size = ctypes.sizeof(self.options)
        self.outputs = (ctypes.c_void_p * max(self.num_outputs, 1))()
        self.output_lists = (ctypes.c_void_p * 1)(ctypes.addressof(self.outputs))
        self.arguments: ctypes.Array | None = None
        self.argument_lists = (ctypes.c_void_p * 1)()
        self.args = structs["PJRT_LoadedExecutable_Execute_Args"]()
        self.args.struct_size = ctypes.sizeof(self.args)
        self.args.executable = executable.ptr
        self.args.options = ctypes.addressof(self.options)
        self.args.argument_lists = ctypes.addressof(self.argument_lists)
        self.args.num_devices = 1
        self.args.output_lists = ctypes.addressof(self.output_lists)
        self.completion = (ctypes.c_void_p * 1)()
        self.args.device_complete_events = ctypes.addressof(self.completion)
        self.function = runtime.api.function("PJRT_LoadedExecutable_Execute")
        self.executable = executable  # kept alive as long as its launcher

    def __call__(self, buffers, device) -> tuple[list, pjrt_capi.Event]:
        with self.lock:
            if self.arguments is None or len(self.arguments) != max(len(buffers), 1):
                self.arguments = (ctypes.c_void_p * max(len(buffers), 1))()
                self.argument_lists[0] = ctypes.addressof(self.arguments)
            for i, buffer in enumerate(buffers):
                self.arguments[i] = buffer.ptr
            self.args.num_args = len(buffers)
            self.args.execute_device = device.ptr if device is not None else None
            error = self.function(ctypes.byref(self.args))
            if error:
                raise self.runtime.api.error_from_ptr(error, "PJRT_LoadedExecutable_Execute")
            client = self.runtime.client
            completion = pjrt_capi.Event(self.runtime.api, self.completion[0], client)
            return [pjrt_capi.Buffer(client, self.outputs[i]) for i in range(self.num_outputs)], completion


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
