"""Client: PJRT_Client (devices, memories, buffers from host data, compile, deserialize); closing
it frees what it still owns first."""

from __future__ import annotations

import ctypes
import sys
import weakref
from typing import TYPE_CHECKING

import numpy as np

from pjrt_neuron.pjrt_capi.buffers import Buffer
from pjrt_neuron.pjrt_capi.compile_options import compile_options_proto
from pjrt_neuron.pjrt_capi.devices import Device, Memory
from pjrt_neuron.pjrt_capi.events import Event
from pjrt_neuron.pjrt_capi.errors import PjrtError
from pjrt_neuron.pjrt_capi.executables import Executable, LoadedExecutable
from pjrt_neuron.pjrt_capi.handles import _Handle
from pjrt_neuron.pjrt_capi.header import STRUCTS, HostBufferSemantics
from pjrt_neuron.pjrt_capi.values import _named_values_in, _ptr_array, _string_at, dtype_to_buffer_type

if TYPE_CHECKING:
    from pjrt_neuron.pjrt_capi.api import Api


class Client(_Handle):
    """PJRT_Client; ``with Client(api) as c:`` closes it (and leftovers)."""

    def __init__(self, api: Api, options: dict | None = None):
        arr, n, keep = _named_values_in(options)
        a = api.call("PJRT_Client_Create", create_options=arr, num_options=n)
        del keep
        super().__init__(api, a.client)
        self._owned = weakref.WeakSet()

    def close(self) -> None:
        """Destroy every still-alive object made through this client, then
        the client."""
        if self.ptr is None:
            return
        order = (Event, Buffer, Executable, LoadedExecutable)
        leftovers = sorted(list(self._owned),
                           key=lambda o: order.index(type(o)) if type(o) in order else 9)
        for obj in leftovers:
            try:
                obj.destroy()
            except PjrtError:
                pass
        ptr, self.ptr = self.ptr, None
        self.api.call("PJRT_Client_Destroy", client=ptr)

    destroy = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if sys.is_finalizing() or getattr(self, "ptr", None) is None:
            return
        try:
            self.close()
        except Exception:
            pass

    def _call(self, fn, **fields):
        if self.ptr is None:
            raise ValueError("client is closed")
        return self.api.call(fn, client=self.ptr, **fields)

    @property
    def platform_name(self) -> str:
        a = self._call("PJRT_Client_PlatformName")
        return _string_at(a.platform_name, a.platform_name_size)

    @property
    def platform_version(self) -> str:
        a = self._call("PJRT_Client_PlatformVersion")
        return _string_at(a.platform_version, a.platform_version_size)

    @property
    def process_index(self) -> int:
        return self._call("PJRT_Client_ProcessIndex").process_index

    def devices(self) -> list[Device]:
        a = self._call("PJRT_Client_Devices")
        return [Device(self, p) for p in _ptr_array(a.devices, a.num_devices)]

    def addressable_devices(self) -> list[Device]:
        a = self._call("PJRT_Client_AddressableDevices")
        return [Device(self, p) for p in
                _ptr_array(a.addressable_devices, a.num_addressable_devices)]

    def lookup_device(self, device_id: int) -> Device:
        return Device(self, self._call("PJRT_Client_LookupDevice",
                                       id=device_id).device)

    def lookup_addressable_device(self, local_hardware_id: int) -> Device:
        return Device(self, self._call(
            "PJRT_Client_LookupAddressableDevice",
            local_hardware_id=local_hardware_id).addressable_device)

    def addressable_memories(self) -> list[Memory]:
        a = self._call("PJRT_Client_AddressableMemories")
        return [Memory(self, p) for p in
                _ptr_array(a.addressable_memories, a.num_addressable_memories)]

    def default_device_assignment(self, num_replicas: int,
                                  num_partitions: int = 1) -> list[int]:
        n = num_replicas * num_partitions
        out = (ctypes.c_int * n)()
        self._call("PJRT_Client_DefaultDeviceAssignment",
                   num_replicas=num_replicas, num_partitions=num_partitions,
                   default_assignment_size=n, default_assignment=out)
        return list(out)

    def buffer_from_numpy(self, arr, device: Device | None = None,
                          memory: Memory | None = None,
                          semantics=HostBufferSemantics.kImmutableOnlyDuringCall,
                          byte_strides=None, device_layout=None) -> Buffer:
        """Host -> device.  Without ``byte_strides`` the array is made dense
        row-major first; with them, ``arr``'s own memory is passed as is.
        Defaults to the first addressable device when neither device nor
        memory is given."""
        arr = np.asarray(arr)
        if byte_strides is None and not arr.flags.c_contiguous:
            arr = arr.copy(order="C")  # (ascontiguousarray would turn 0-d into 1-d)
        if device is None and memory is None:
            device = self.addressable_devices()[0]
        dims = (ctypes.c_int64 * arr.ndim)(*arr.shape)
        strides = None
        if byte_strides is not None:
            strides = (ctypes.c_int64 * len(byte_strides))(*byte_strides)
        a = self._call(
            "PJRT_Client_BufferFromHostBuffer",
            data=arr.ctypes.data, type=dtype_to_buffer_type(arr.dtype),
            dims=dims, num_dims=arr.ndim,
            byte_strides=strides,
            num_byte_strides=0 if byte_strides is None else len(byte_strides),
            host_buffer_semantics=int(semantics), device=device, memory=memory,
            device_layout=device_layout)
        buf = Buffer(self, a.buffer)
        if a.done_with_host_buffer:
            done = Event(self.api, a.done_with_host_buffer, self)
            zero_copy = int(semantics) in (
                HostBufferSemantics.kImmutableZeroCopy,
                HostBufferSemantics.kMutableZeroCopy)
            if zero_copy:  # host memory backs the buffer until it is freed
                buf._host_hold = (arr, done)
            else:
                try:
                    done.await_()
                finally:
                    done.destroy()
        return buf

    def compile(self, code: bytes | str, format: str = "mlir",
                compile_options: bytes | None = None) -> LoadedExecutable:
        """Compile ``code`` ("mlir": text or bytecode; "hlo": serialized
        HloModuleProto).  ``compile_options`` is a serialized
        CompileOptionsProto; None means ``compile_options_proto()`` (1
        replica, 1 partition).  b"" is passed through as the all-defaults
        proto, whose num_replicas=0 makes the stock CPU plugin abort the
        process (CHECK replica_count > 0), so only use it deliberately."""
        if compile_options is None:
            compile_options = compile_options_proto()
        if isinstance(code, str):
            code = code.encode()
        fmt = format.encode()
        prog = STRUCTS["PJRT_Program"]()
        prog.struct_size = ctypes.sizeof(prog)
        code_buf = ctypes.create_string_buffer(code, len(code))
        fmt_buf = ctypes.create_string_buffer(fmt, len(fmt))
        prog.code, prog.code_size = ctypes.addressof(code_buf), len(code)
        prog.format, prog.format_size = ctypes.addressof(fmt_buf), len(fmt)
        a = self._call("PJRT_Client_Compile", program=prog,
                       compile_options=compile_options,
                       compile_options_size=len(compile_options))
        return LoadedExecutable(self, a.executable)

    def deserialize_and_load(self, data: bytes,
                             compile_options: bytes | None = None) -> LoadedExecutable:
        a = self._call(
            "PJRT_Executable_DeserializeAndLoad", serialized_executable=data,
            serialized_executable_size=len(data),
            overridden_serialized_compile_options=compile_options,
            overridden_serialized_compile_options_size=len(compile_options or b""))
        return LoadedExecutable(self, a.loaded_executable)
