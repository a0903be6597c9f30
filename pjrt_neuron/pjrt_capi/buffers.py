"""Buffer: PJRT_Buffer (shape, type, placement, copies, reading back to numpy)."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import numpy as np

from pjrt_neuron.pjrt_capi.devices import Device, Memory
from pjrt_neuron.pjrt_capi.events import Event
from pjrt_neuron.pjrt_capi.handles import _Owned
from pjrt_neuron.pjrt_capi.header import BufferType
from pjrt_neuron.pjrt_capi.values import buffer_type_to_dtype

if TYPE_CHECKING:
    from pjrt_neuron.pjrt_capi.client import Client


class Buffer(_Owned):
    _destroy_fn, _destroy_field = "PJRT_Buffer_Destroy", "buffer"

    # (host array, done event) pairs whose zero-copy buffer was destroyed but
    # whose done event had not fired yet: leaked on purpose, never freed early.
    _orphaned_host_data: list = []

    def __init__(self, client: "Client", ptr: int):
        super().__init__(client.api, ptr, client)
        self._host_hold = None  # (array, done Event) for zero-copy semantics

    def _get(self, fn, out):
        self._check()
        return getattr(self.api.call(fn, buffer=self.ptr), out)

    @property
    def element_type(self):
        t = self._get("PJRT_Buffer_ElementType", "type")
        try:
            return BufferType(t)
        except ValueError:
            return t

    @property
    def dtype(self) -> np.dtype:
        return buffer_type_to_dtype(self.element_type)

    @property
    def dims(self) -> tuple[int, ...]:
        self._check()
        a = self.api.call("PJRT_Buffer_Dimensions", buffer=self.ptr)
        if not a.num_dims:
            return ()
        return tuple((ctypes.c_int64 * a.num_dims).from_address(a.dims))

    shape = dims

    @property
    def unpadded_dims(self) -> tuple[int, ...]:
        self._check()
        a = self.api.call("PJRT_Buffer_UnpaddedDimensions", buffer=self.ptr)
        if not a.num_dims:
            return ()
        return tuple((ctypes.c_int64 * a.num_dims).from_address(a.unpadded_dims))

    @property
    def on_device_size(self) -> int:
        return self._get("PJRT_Buffer_OnDeviceSizeInBytes", "on_device_size_in_bytes")

    @property
    def device(self) -> Device:
        return Device(self.client, self._get("PJRT_Buffer_Device", "device"))

    @property
    def memory(self) -> Memory:
        return Memory(self.client, self._get("PJRT_Buffer_Memory", "memory"))

    @property
    def is_deleted(self) -> bool:
        return bool(self._get("PJRT_Buffer_IsDeleted", "is_deleted"))

    @property
    def is_on_cpu(self) -> bool:
        return bool(self._get("PJRT_Buffer_IsOnCpu", "is_on_cpu"))

    def ready_event(self) -> Event:
        return Event(self.api, self._get("PJRT_Buffer_ReadyEvent", "event"),
                     self.client)

    def block_until_ready(self) -> None:
        with self.ready_event() as ev:
            ev.await_()

    def delete(self) -> None:
        self._check()
        self.api.call("PJRT_Buffer_Delete", buffer=self.ptr)

    def host_size(self) -> int:
        """Bytes ToHostBuffer needs (the dst=NULL query form)."""
        self._check()
        return self.api.call("PJRT_Buffer_ToHostBuffer", src=self.ptr,
                             dst=None, dst_size=0).dst_size

    def to_numpy(self) -> np.ndarray:
        """Copy to a new dense row-major array and wait for the copy."""
        self._check()
        out = np.empty(self.dims, dtype=self.dtype)
        a = self.api.call("PJRT_Buffer_ToHostBuffer", src=self.ptr,
                          dst=out.ctypes.data, dst_size=out.nbytes)
        if a.event:
            ev = Event(self.api, a.event, self.client)
            try:
                ev.await_()
            finally:
                ev.destroy()
        return out

    def copy_to_device(self, device: Device) -> "Buffer":
        return Buffer(self.client, self.api.call(
            "PJRT_Buffer_CopyToDevice", buffer=self.ptr,
            dst_device=device).dst_buffer)

    def copy_to_memory(self, memory: Memory) -> "Buffer":
        return Buffer(self.client, self.api.call(
            "PJRT_Buffer_CopyToMemory", buffer=self.ptr,
            dst_memory=memory).dst_buffer)

    def destroy(self) -> None:
        super().destroy()
        if self._host_hold is not None:
            arr, ev = self._host_hold
            self._host_hold = None
            if ev.is_ready:
                ev.destroy()
            else:
                Buffer._orphaned_host_data.append((arr, ev))
