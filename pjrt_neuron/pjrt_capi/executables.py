"""Executable and LoadedExecutable: a compiled program's facts, and running it."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from pjrt_neuron.pjrt_capi.buffers import Buffer
from pjrt_neuron.pjrt_capi.devices import Device
from pjrt_neuron.pjrt_capi.errors import PjrtError
from pjrt_neuron.pjrt_capi.events import Event
from pjrt_neuron.pjrt_capi.handles import _Owned
from pjrt_neuron.pjrt_capi.header import STRUCTS, BufferType
from pjrt_neuron.pjrt_capi.values import _named_values_out, _ptr_array, _string_at

if TYPE_CHECKING:
    from pjrt_neuron.pjrt_capi.client import Client


class Executable(_Owned):
    """PJRT_Executable (compiled, not necessarily loaded)."""
    _destroy_fn, _destroy_field = "PJRT_Executable_Destroy", "executable"

    def _call(self, fn):
        self._check()
        return self.api.call(fn, executable=self.ptr)

    @property
    def name(self) -> str:
        a = self._call("PJRT_Executable_Name")
        return _string_at(a.executable_name, a.executable_name_size)

    @property
    def num_outputs(self) -> int:
        return self._call("PJRT_Executable_NumOutputs").num_outputs

    @property
    def num_replicas(self) -> int:
        return self._call("PJRT_Executable_NumReplicas").num_replicas

    @property
    def num_partitions(self) -> int:
        return self._call("PJRT_Executable_NumPartitions").num_partitions

    @property
    def size_of_generated_code(self) -> int:
        return self._call("PJRT_Executable_SizeOfGeneratedCodeInBytes").size_in_bytes

    @property
    def output_element_types(self) -> list:
        a = self._call("PJRT_Executable_OutputElementTypes")
        if not a.num_output_types:
            return []
        raw = (ctypes.c_int * a.num_output_types).from_address(a.output_types)
        return [BufferType(t) if t in BufferType._value2member_map_ else t
                for t in raw]

    @property
    def output_dimensions(self) -> list[tuple[int, ...]]:
        a = self._call("PJRT_Executable_OutputDimensions")
        n = a.num_outputs
        if not n:
            return []
        sizes = list((ctypes.c_size_t * n).from_address(a.dim_sizes))
        total = sum(sizes)
        flat = list((ctypes.c_int64 * total).from_address(a.dims)) if total else []
        out, pos = [], 0
        for s in sizes:
            out.append(tuple(flat[pos:pos + s]))
            pos += s
        return out

    @property
    def output_memory_kinds(self) -> list[str]:
        a = self._call("PJRT_Executable_OutputMemoryKinds")
        n = a.num_outputs
        if not n:
            return []
        ptrs = _ptr_array(a.memory_kinds, n)
        sizes = list((ctypes.c_size_t * n).from_address(a.memory_kind_sizes))
        return [_string_at(p, s) for p, s in zip(ptrs, sizes)]

    @property
    def fingerprint(self) -> bytes:
        a = self._call("PJRT_Executable_Fingerprint")
        if not a.executable_fingerprint:
            return b""
        return ctypes.string_at(a.executable_fingerprint,
                                a.executable_fingerprint_size)

    def cost_analysis(self) -> dict:
        a = self._call("PJRT_Executable_GetCostAnalysis")
        return _named_values_out(a.properties, a.num_properties)

    def compiled_memory_stats(self) -> dict:
        a = self._call("PJRT_Executable_GetCompiledMemoryStats")
        return {name: getattr(a, name) for name, _ in type(a)._fields_[3:]}

    def serialize(self) -> bytes:
        a = self._call("PJRT_Executable_Serialize")
        try:
            return ctypes.string_at(a.serialized_bytes, a.serialized_bytes_size)
        finally:
            if a.serialized_executable_deleter:
                ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
                    a.serialized_executable_deleter)(a.serialized_executable)

    def optimized_program(self) -> tuple[str, bytes]:
        """(format, code) via the two-call size-then-fill protocol."""
        self._check()
        prog = STRUCTS["PJRT_Program"]()
        prog.struct_size = ctypes.sizeof(prog)
        self.api.call("PJRT_Executable_OptimizedProgram", executable=self.ptr,
                      program=prog)
        buf = ctypes.create_string_buffer(max(prog.code_size, 1))
        prog.code = ctypes.addressof(buf)
        self.api.call("PJRT_Executable_OptimizedProgram", executable=self.ptr,
                      program=prog)
        return (_string_at(prog.format, prog.format_size),
                buf.raw[:prog.code_size])


class LoadedExecutable(_Owned):
    _destroy_fn, _destroy_field = "PJRT_LoadedExecutable_Destroy", "executable"

    def __init__(self, client: "Client", ptr: int):
        super().__init__(client.api, ptr, client)
        self._num_outputs = None

    def get_executable(self) -> Executable:
        """New PJRT_Executable; the caller destroys it (or uses ``with``)."""
        self._check()
        return Executable(self.api, self.api.call(
            "PJRT_LoadedExecutable_GetExecutable",
            loaded_executable=self.ptr).executable, self.client)

    @property
    def num_outputs(self) -> int:
        if self._num_outputs is None:
            with self.get_executable() as ex:
                self._num_outputs = ex.num_outputs
        return self._num_outputs

    @property
    def addressable_devices(self) -> list[Device]:
        self._check()
        a = self.api.call("PJRT_LoadedExecutable_AddressableDevices",
                          executable=self.ptr)
        return [Device(self.client, p) for p in
                _ptr_array(a.addressable_devices, a.num_addressable_devices)]

    @property
    def fingerprint(self) -> bytes:
        self._check()
        a = self.api.call("PJRT_LoadedExecutable_Fingerprint", executable=self.ptr)
        if not a.executable_fingerprint:
            return b""
        return ctypes.string_at(a.executable_fingerprint,
                                a.executable_fingerprint_size)

    def delete(self) -> None:
        self._check()
        self.api.call("PJRT_LoadedExecutable_Delete", executable=self.ptr)

    @property
    def is_deleted(self) -> bool:
        self._check()
        return bool(self.api.call("PJRT_LoadedExecutable_IsDeleted",
                                  executable=self.ptr).is_deleted)

    def execute_async(self, args, non_donatable=(), execute_device=None,
                      options_struct_size=None, launch_id: int = 0):
        """Launch; returns (outputs per device, completion Event per device).
        ``args`` is a list of Buffers (one device) or a list of such lists."""
        self._check()
        if args and isinstance(args[0], (list, tuple)):
            per_device = [list(a) for a in args]
        else:
            per_device = [list(args)]
        n_dev, n_args = len(per_device), len(per_device[0])
        if any(len(a) != n_args for a in per_device):
            raise ValueError("every device needs the same number of arguments")
        n_out = self.num_outputs
        vp = ctypes.c_void_p
        arg_rows = [(vp * max(n_args, 1))(*[b.ptr for b in row]) for row in per_device]
        arg_lists = (vp * n_dev)(*[ctypes.addressof(r) for r in arg_rows])
        out_rows = [(vp * max(n_out, 1))() for _ in range(n_dev)]
        out_lists = (vp * n_dev)(*[ctypes.addressof(r) for r in out_rows])
        events = (vp * n_dev)()

        opts = STRUCTS["PJRT_ExecuteOptions"]()
        opts.struct_size = (ctypes.sizeof(opts) if options_struct_size is None
                            else options_struct_size)
        opts.launch_id = launch_id
        keep = [arg_rows, out_rows]
        if non_donatable:
            idx = (ctypes.c_int64 * len(non_donatable))(*non_donatable)
            keep.append(idx)
            opts.non_donatable_input_indices = ctypes.addressof(idx)
            opts.num_non_donatable_input_indices = len(non_donatable)

        self.api.call("PJRT_LoadedExecutable_Execute", executable=self.ptr,
                      options=opts, argument_lists=arg_lists,
                      num_devices=n_dev, num_args=n_args,
                      output_lists=out_lists, device_complete_events=events,
                      execute_device=execute_device)
        outputs = [[Buffer(self.client, row[i]) for i in range(n_out)]
                   for row in out_rows]
        done = [Event(self.api, e, self.client) if e else None for e in events]
        return outputs, done

    def execute(self, args, non_donatable=(), execute_device=None,
                options_struct_size=None, launch_id: int = 0) -> list[list[Buffer]]:
        """Run and wait for completion; returns outputs[device][output]."""
        outputs, done = self.execute_async(
            args, non_donatable=non_donatable, execute_device=execute_device,
            options_struct_size=options_struct_size, launch_id=launch_id)
        first_error = None
        for ev in done:
            if ev is None:
                continue
            try:
                ev.await_()
            except PjrtError as e:
                first_error = first_error or e
            finally:
                ev.destroy()
        if first_error is not None:
            for row in outputs:
                for b in row:
                    b.destroy()
            raise first_error
        return outputs
