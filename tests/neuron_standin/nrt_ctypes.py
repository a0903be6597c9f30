"""ctypes bindings of the libnrt stand-in, declared from the contract (tests only).

Thin on purpose: every call returns the raw NRT_STATUS, so tests assert the contract's numbers.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

SUCCESS, FAILURE, INVALID, INVALID_HANDLE, RESOURCE, TIMEOUT = 0, 1, 2, 3, 4, 5
LOAD_NOT_ENOUGH_NC, UNSUPPORTED_NEFF_VERSION, UNINITIALIZED, CLOSED = 9, 10, 13, 14
EXEC_BAD_INPUT, EXEC_COMPLETED_WITH_NUM_ERR, EXEC_COMPLETED_WITH_ERR = 1002, 1003, 1004

DEVICE, HOST, VIRTUAL = 0, 1, 2
USAGE_INPUT, USAGE_OUTPUT = 0, 1
NO_FW = 1

DTYPES = {"uint64": 1, "int8": 2, "uint8": 3, "int16": 4, "uint16": 5, "bfloat16": 6,
          "float16": 7, "int32": 8, "uint32": 9, "float32": 10, "fp32r": 11, "int64": 12,
          "fp8_e3": 13, "fp8_e4": 14, "fp8_e5": 15}

c_void_pp = ctypes.POINTER(ctypes.c_void_p)


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("usage", ctypes.c_int), ("size", ctypes.c_size_t),
                ("dtype", ctypes.c_int), ("shape", ctypes.POINTER(ctypes.c_uint32)),
                ("ndim", ctypes.c_uint32)]


class TensorInfoArrayHeader(ctypes.Structure):
    _fields_ = [("tensor_count", ctypes.c_uint64)]


class Version(ctypes.Structure):
    _fields_ = [("rt_major", ctypes.c_uint64), ("rt_minor", ctypes.c_uint64),
                ("rt_patch", ctypes.c_uint64), ("rt_maintenance", ctypes.c_uint64),
                ("rt_detail", ctypes.c_char * 128), ("git_hash", ctypes.c_char * 64)]


class InstanceInfo(ctypes.Structure):
    _fields_ = [("family", ctypes.c_uint32), ("size", ctypes.c_uint32)]


class MemoryStats(ctypes.Structure):
    _fields_ = [("bytes_used", ctypes.c_size_t), ("bytes_limit", ctypes.c_size_t)]


@dataclass
class ListedTensor:
    name: str
    usage: int
    size: int
    dtype: int
    shape: list[int]


_SIGNATURES = {
    "nrt_init": (ctypes.c_int, [ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p]),
    "nrt_close": (None, []),
    "nrt_get_version": (ctypes.c_int, [ctypes.POINTER(Version), ctypes.c_size_t]),
    "nrt_get_visible_vnc_count": (ctypes.c_int, [ctypes.POINTER(ctypes.c_uint32)]),
    "nrt_get_total_vnc_count": (ctypes.c_int, [ctypes.POINTER(ctypes.c_uint32)]),
    "nrt_get_instance_info": (ctypes.c_int, [ctypes.POINTER(InstanceInfo), ctypes.c_size_t]),
    "nrt_get_status_as_str": (ctypes.c_char_p, [ctypes.c_int]),
    "nrt_get_vnc_memory_stats": (ctypes.c_int, [ctypes.c_uint32, ctypes.POINTER(MemoryStats),
                                                ctypes.c_size_t,
                                                ctypes.POINTER(ctypes.c_size_t)]),
    "nrt_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32,
                                ctypes.c_int32, c_void_pp]),
    "nrt_load_collectives": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32,
                                            ctypes.c_int32, ctypes.c_uint32, ctypes.c_uint32,
                                            c_void_pp]),
    "nrt_unload": (ctypes.c_int, [ctypes.c_void_p]),
    "nrt_get_model_tensor_info": (ctypes.c_int, [ctypes.c_void_p, c_void_pp]),
    "nrt_free_model_tensor_info": (ctypes.c_int, [ctypes.c_void_p]),
    "nrt_tensor_allocate": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_size_t,
                                           ctypes.c_char_p, c_void_pp]),
    "nrt_tensor_free": (None, [c_void_pp]),
    "nrt_tensor_attach_buffer": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                                ctypes.c_size_t]),
    "nrt_tensor_read": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.c_size_t]),
    "nrt_tensor_write": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                        ctypes.c_size_t]),
    "nrt_tensor_get_size": (ctypes.c_size_t, [ctypes.c_void_p]),
    "nrt_tensor_copy": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                       ctypes.c_size_t, ctypes.c_size_t]),
    "nrt_allocate_tensor_set": (ctypes.c_int, [c_void_pp]),
    "nrt_destroy_tensor_set": (None, [c_void_pp]),
    "nrt_add_tensor_to_tensor_set": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p,
                                                    ctypes.c_void_p]),
    "nrt_get_tensor_from_tensor_set": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p,
                                                      c_void_pp]),
    "nrt_execute": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
}


class Nrt:
    def __init__(self, path):
        self.lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(self.lib, name)
            function.restype, function.argtypes = restype, argtypes

    def __getattr__(self, name):
        return getattr(self.lib, name)

    def init(self) -> int:
        return self.lib.nrt_init(NO_FW, b"", b"")

    def load(self, neff: bytes, vnc: int = 0) -> tuple[int, ctypes.c_void_p]:
        model = ctypes.c_void_p()
        status = self.lib.nrt_load(neff, len(neff), vnc, -1, ctypes.byref(model))
        return status, model

    def tensor_info(self, model) -> list[ListedTensor]:
        info = ctypes.c_void_p()
        status = self.lib.nrt_get_model_tensor_info(model, ctypes.byref(info))
        assert status == SUCCESS, status
        count = TensorInfoArrayHeader.from_address(info.value).tensor_count
        array_offset = ctypes.sizeof(TensorInfoArrayHeader)
        entries = (TensorInfo * count).from_address(info.value + array_offset)
        listed = [ListedTensor(e.name.decode(), e.usage, e.size, e.dtype,
                               [e.shape[d] for d in range(e.ndim)]) for e in entries]
        assert self.lib.nrt_free_model_tensor_info(info) == SUCCESS
        return listed

    def allocate(self, size: int, vnc: int = 0, placement: int = DEVICE,
                 name: bytes = b"t") -> tuple[int, ctypes.c_void_p]:
        tensor = ctypes.c_void_p()
        status = self.lib.nrt_tensor_allocate(placement, vnc, size, name, ctypes.byref(tensor))
        return status, tensor

    def free(self, tensor: ctypes.c_void_p) -> None:
        self.lib.nrt_tensor_free(ctypes.byref(tensor))

    def write(self, tensor, data: bytes, offset: int = 0) -> int:
        return self.lib.nrt_tensor_write(tensor, data, offset, len(data))

    def read(self, tensor, size: int, offset: int = 0) -> tuple[int, bytes]:
        buffer = ctypes.create_string_buffer(size)
        status = self.lib.nrt_tensor_read(tensor, buffer, offset, size)
        return status, buffer.raw

    def tensor_set(self) -> ctypes.c_void_p:
        result = ctypes.c_void_p()
        assert self.lib.nrt_allocate_tensor_set(ctypes.byref(result)) == SUCCESS
        return result

    def add(self, tensor_set, name: str, tensor) -> int:
        return self.lib.nrt_add_tensor_to_tensor_set(tensor_set, name.encode(), tensor)

    def memory_stats(self, vnc: int) -> tuple[int, MemoryStats]:
        stats = MemoryStats()
        written = ctypes.c_size_t()
        status = self.lib.nrt_get_vnc_memory_stats(vnc, ctypes.byref(stats),
                                                   ctypes.sizeof(stats), ctypes.byref(written))
        return status, stats

    def visible_count(self) -> tuple[int, int]:
        count = ctypes.c_uint32()
        return self.lib.nrt_get_visible_vnc_count(ctypes.byref(count)), count.value

    def total_count(self) -> tuple[int, int]:
        count = ctypes.c_uint32()
        return self.lib.nrt_get_total_vnc_count(ctypes.byref(count)), count.value

    def instance_info(self) -> tuple[int, InstanceInfo]:
        info = InstanceInfo()
        return self.lib.nrt_get_instance_info(ctypes.byref(info), ctypes.sizeof(info)), info
