"""Device and Memory: PJRT_Device with its description, and PJRT_Memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pjrt_neuron.pjrt_capi.handles import _Handle
from pjrt_neuron.pjrt_capi.header import _field_names
from pjrt_neuron.pjrt_capi.values import _named_values_out, _ptr_array, _string_at

if TYPE_CHECKING:
    from pjrt_neuron.pjrt_capi.client import Client


class Memory(_Handle):
    def __init__(self, client: "Client", ptr: int):
        super().__init__(client.api, ptr)
        self.client = client

    def _str(self, fn, out):
        a = self.api.call(fn, memory=self.ptr)
        return _string_at(getattr(a, out), getattr(a, out + "_size"))

    @property
    def id(self) -> int:
        return self.api.call("PJRT_Memory_Id", memory=self.ptr).id

    @property
    def kind(self) -> str:
        return self._str("PJRT_Memory_Kind", "kind")

    @property
    def kind_id(self) -> int:
        return self.api.call("PJRT_Memory_Kind_Id", memory=self.ptr).kind_id

    @property
    def debug_string(self) -> str:
        return self._str("PJRT_Memory_DebugString", "debug_string")

    @property
    def to_string(self) -> str:
        return self._str("PJRT_Memory_ToString", "to_string")

    @property
    def addressable_by_devices(self) -> list["Device"]:
        a = self.api.call("PJRT_Memory_AddressableByDevices", memory=self.ptr)
        return [Device(self.client, p) for p in _ptr_array(a.devices, a.num_devices)]


class Device(_Handle):
    def __init__(self, client: "Client", ptr: int):
        super().__init__(client.api, ptr)
        self.client = client
        self._desc = None

    @property
    def description(self) -> int:
        """PJRT_DeviceDescription* (owned by the device)."""
        if self._desc is None:
            self._desc = self.api.call("PJRT_Device_GetDescription",
                                       device=self.ptr).device_description
        return self._desc

    def _desc_call(self, fn):
        return self.api.call(fn, device_description=self.description)

    def _desc_str(self, fn, out):
        a = self._desc_call(fn)
        return _string_at(getattr(a, out), getattr(a, out + "_size"))

    @property
    def id(self) -> int:
        return self._desc_call("PJRT_DeviceDescription_Id").id

    @property
    def process_index(self) -> int:
        return self._desc_call("PJRT_DeviceDescription_ProcessIndex").process_index

    @property
    def kind(self) -> str:
        return self._desc_str("PJRT_DeviceDescription_Kind", "device_kind")

    @property
    def debug_string(self) -> str:
        return self._desc_str("PJRT_DeviceDescription_DebugString", "debug_string")

    @property
    def to_string(self) -> str:
        return self._desc_str("PJRT_DeviceDescription_ToString", "to_string")

    def attributes(self) -> dict:
        a = self._desc_call("PJRT_DeviceDescription_Attributes")
        return _named_values_out(a.attributes, a.num_attributes)

    @property
    def local_hardware_id(self) -> int:
        return self.api.call("PJRT_Device_LocalHardwareId",
                             device=self.ptr).local_hardware_id

    @property
    def is_addressable(self) -> bool:
        return bool(self.api.call("PJRT_Device_IsAddressable",
                                  device=self.ptr).is_addressable)

    @property
    def addressable_memories(self) -> list[Memory]:
        a = self.api.call("PJRT_Device_AddressableMemories", device=self.ptr)
        return [Memory(self.client, p) for p in _ptr_array(a.memories, a.num_memories)]

    @property
    def default_memory(self) -> Memory:
        return Memory(self.client, self.api.call(
            "PJRT_Device_DefaultMemory", device=self.ptr).memory)

    def memory_stats(self) -> dict:
        """bytes_in_use plus every optional stat the plugin marked as set."""
        a = self.api.call("PJRT_Device_MemoryStats", device=self.ptr)
        out = {"bytes_in_use": a.bytes_in_use}
        for name in _field_names(type(a)):
            if name.endswith("_is_set") and getattr(a, name):
                stat = name[:-len("_is_set")]
                out[stat] = getattr(a, stat)
        return out

    def __repr__(self):
        if self.client.ptr is None:  # the device died with its client
            return super().__repr__()
        return f"<Device id={self.id} kind={self.kind!r}>"
