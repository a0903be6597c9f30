"""The Layouts and MemoryDescriptions extensions through the C API, against the stock CPU plugin.

The extensions' structs are not in pjrt_c_api.h, so they are declared here (pointer-sized fields
after PJRT_Extension_Base, as in openxla/xla's extension headers).
"""

import ctypes

import numpy as np
import pytest

import pjrt_capi as P

_V = ctypes.c_void_p
_SZ = ctypes.c_size_t
_FN = ctypes.CFUNCTYPE(_V, _V)
_BASE = [("struct_size", _SZ), ("type", ctypes.c_int), ("next", _V)]


def _args(name, fields):
    return type(name, (ctypes.Structure,), {"_fields_": [("struct_size", _SZ), ("extension_start", _V)] + fields})


Destroy = _args("Destroy", [("layout", _V)])
Serialize = _args("Serialize", [("layout", _V), ("bytes", _V), ("size", _SZ), ("serialized", _V), ("deleter", _V)])
ClientDefault = _args("ClientDefault", [("client", _V), ("type", ctypes.c_int), ("dims", _V), ("num_dims", _SZ),
                                        ("layout", _V)])
BufferLayout = _args("BufferLayout", [("buffer", _V), ("layout", _V)])
OutputLayouts = _args("OutputLayouts", [("executable", _V), ("num_outputs", _SZ), ("layouts", _V)])
MemoryDescriptions = _args("MemoryDescriptions", [("device_description", _V), ("descriptions", _V), ("num", _SZ),
                                                  ("default_index", _SZ)])
MemoryKind = _args("MemoryKind", [("description", _V), ("kind", _V), ("kind_size", _SZ), ("kind_id", ctypes.c_int)])

LAYOUTS, MEMORY_DESCRIPTIONS = P.CONSTANTS["PJRT_Extension_Type_Layouts"], P.CONSTANTS["PJRT_Extension_Type_MemoryDescriptions"]
LAYOUT_SLOTS = ["destroy", "serialize", "client_default", "buffer", "topology_default", "output_layouts"]


def _extension(api, ext_type):
    """(struct_size, [function pointers]) of the extension of `ext_type`, or None."""
    addr = ctypes.c_void_p.from_address(api.address + 8).value  # PJRT_Api.extension_start
    while addr:
        size, kind, nxt = _SZ.from_address(addr).value, ctypes.c_int.from_address(addr + 8).value, \
            _V.from_address(addr + 16).value
        if kind == ext_type:
            return size, [_V.from_address(addr + 24 + 8 * i).value for i in range((size - 24) // 8)]
        addr = nxt
    return None


class Ext:
    """Calls one extension's functions by slot name, raising PjrtError like api.call."""

    def __init__(self, api, ext_type, slots):
        found = _extension(api, ext_type)
        assert found is not None, f"{api.path} has no extension {ext_type}"
        self.api, self.size, pointers = api, found[0], found[1]
        self.fns = {name: _FN(p) for name, p in zip(slots, pointers) if p}

    def call(self, slot, args):
        args.struct_size = ctypes.sizeof(args)
        err = self.fns[slot](ctypes.addressof(args))
        if err:
            raise self.api.error_from_ptr(err)
        return args

    def serialize(self, layout) -> bytes:
        s = self.call("serialize", Serialize(layout=layout))
        data = ctypes.string_at(s.bytes, s.size)
        ctypes.CFUNCTYPE(None, _V)(s.deleter)(s.serialized)
        return data

    def default_layout(self, client, dtype, dims) -> bytes:
        d = (ctypes.c_int64 * max(len(dims), 1))(*dims)
        a = self.call("client_default", ClientDefault(client=client.ptr, type=int(P.dtype_to_buffer_type(dtype)),
                                                     dims=ctypes.addressof(d), num_dims=len(dims)))
        try:
            return self.serialize(a.layout)
        finally:
            self.call("destroy", Destroy(layout=a.layout))

    def buffer_layout(self, buffer) -> bytes:
        a = self.call("buffer", BufferLayout(buffer=buffer.ptr))
        try:
            return self.serialize(a.layout)
        finally:
            self.call("destroy", Destroy(layout=a.layout))

    def output_layouts(self, loaded) -> list[bytes]:
        with loaded.get_executable() as executable:
            a = self.call("output_layouts", OutputLayouts(executable=executable.ptr))
            return [self.serialize(p) for p in P._ptr_array(a.layouts, a.num_outputs)]  # owned by the executable


PROGRAM = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<4x1x5xbf16>, %k: tensor<i32>)
    -> (tensor<3x2xf32>, tensor<4x1x5xbf16>, tensor<i32>, tensor<0x7xf32>) {
  %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = stablehlo.add %b, %b : tensor<4x1x5xbf16>
  %2 = stablehlo.add %k, %k : tensor<i32>
  %3 = stablehlo.constant dense<> : tensor<0x7xf32>
  return %0, %1, %2, %3 : tensor<3x2xf32>, tensor<4x1x5xbf16>, tensor<i32>, tensor<0x7xf32>
}"""

SHAPES = [(np.float32, (2, 3)), (np.float32, ()), (np.int8, (5, 0, 2)), (np.int64, (7,)),
          (np.uint8, (3, 4, 5, 6)), (np.float16, (1, 1))]


@pytest.fixture(scope="module")
def cpu_client(cpu_api):
    c = P.Client(cpu_api)
    yield c
    c.close()


def test_the_plugin_offers_the_engine_s_layouts_extension_and_its_own_memory_descriptions(plugin_api, cpu_api):
    ours, engine = _extension(plugin_api, LAYOUTS), _extension(cpu_api, LAYOUTS)
    assert engine is not None and ours is not None
    assert ours[0] == engine[0] == 24 + 8 * len(LAYOUT_SLOTS)
    assert all(ours[1])  # no null slot
    assert _extension(plugin_api, MEMORY_DESCRIPTIONS)[0] == _extension(cpu_api, MEMORY_DESCRIPTIONS)[0] == 40


def test_default_layouts_equal_the_cpu_plugin_s(plugin_api, cpu_api, client, cpu_client):
    ours, cpu = Ext(plugin_api, LAYOUTS, LAYOUT_SLOTS), Ext(cpu_api, LAYOUTS, LAYOUT_SLOTS)
    for dtype, dims in SHAPES:
        mine = ours.default_layout(client, dtype, dims)
        assert mine == cpu.default_layout(cpu_client, dtype, dims), (dtype, dims)
        assert mine  # a real serialized layout, not an empty answer


def test_buffer_layouts_equal_the_cpu_plugin_s(plugin_api, cpu_api, client, cpu_client):
    ours, cpu = Ext(plugin_api, LAYOUTS, LAYOUT_SLOTS), Ext(cpu_api, LAYOUTS, LAYOUT_SLOTS)
    for dtype, dims in SHAPES:
        host = np.zeros(dims, dtype=dtype)
        ours_buffer, cpu_buffer = client.buffer_from_numpy(host), cpu_client.buffer_from_numpy(host)
        try:
            assert ours.buffer_layout(ours_buffer) == cpu.buffer_layout(cpu_buffer), (dtype, dims)
        finally:
            ours_buffer.destroy()
            cpu_buffer.destroy()


def test_output_layouts_equal_the_cpu_plugin_s(plugin_api, cpu_api, client, cpu_client):
    ours, cpu = Ext(plugin_api, LAYOUTS, LAYOUT_SLOTS), Ext(cpu_api, LAYOUTS, LAYOUT_SLOTS)
    mine, theirs = client.compile(PROGRAM), cpu_client.compile(PROGRAM)
    try:
        got = ours.output_layouts(mine)
        assert len(got) == 4
        assert got == cpu.output_layouts(theirs)
    finally:
        mine.destroy()
        theirs.destroy()


def _raises(ext, slot, args, code, *words):
    with pytest.raises(P.PjrtError) as info:
        ext.call(slot, args)
    assert info.value.code == code, str(info.value)
    for word in words:
        assert word in str(info.value), str(info.value)


def test_layout_queries_refuse_bad_handles_with_the_function_named(plugin_api, client):
    ext = Ext(plugin_api, LAYOUTS, LAYOUT_SLOTS)
    bad = P.ErrorCode.INVALID_ARGUMENT
    _raises(ext, "client_default", ClientDefault(client=None, type=11, num_dims=0), bad,
            "PJRT_Layouts_ClientGetDefaultLayout", "`client` is null")
    _raises(ext, "client_default", ClientDefault(client=client.ptr, type=11, dims=None, num_dims=2), bad,
            "PJRT_Layouts_ClientGetDefaultLayout", "`dims` is null")
    _raises(ext, "buffer", BufferLayout(buffer=client.ptr), bad, "PJRT_Layouts_BufferMemoryLayout", "not a PJRT_Buffer")
    _raises(ext, "output_layouts", OutputLayouts(executable=None), bad,
            "PJRT_Layouts_ExecutableGetOutputLayouts", "`executable` is null")
    _raises(ext, "serialize", Serialize(layout=None), bad, "PJRT_Layouts_MemoryLayoutSerialize", "`layout` is null")
    _raises(ext, "topology_default", ClientDefault(), P.ErrorCode.UNIMPLEMENTED,
            "PJRT_Layouts_TopologyGetDefaultLayout", "Client_GetDefaultLayout")
    short = BufferLayout(buffer=None)
    err = ext.fns["buffer"](ctypes.addressof(short))  # struct_size 0: older than any caller
    assert err
    error = plugin_api.error_from_ptr(err)
    assert error.code == bad and "PJRT_Layouts_BufferMemoryLayout" in str(error)
    ext.call("destroy", Destroy(layout=None))  # null is allowed, as in the CPU plugin


def _memory_kinds(ext, device_description):
    a = ext.call("list", MemoryDescriptions(device_description=device_description))
    out = []
    for p in P._ptr_array(a.descriptions, a.num):
        k = ext.call("kind", MemoryKind(description=p))
        out.append((ctypes.string_at(k.kind, k.kind_size).decode(), k.kind_id))
    return out, a.default_index


def test_memory_descriptions_match_the_device_s_own_memories(plugin_api, client):
    ext = Ext(plugin_api, MEMORY_DESCRIPTIONS, ["list", "kind"])
    for device in client.addressable_devices():
        kinds, default = _memory_kinds(ext, device.description)
        memories = [(m.kind, m.kind_id) for m in device.addressable_memories]
        assert sorted(kinds) == sorted(memories) and {k for k, _ in kinds} == {"device", "pinned_host"}
        assert kinds[default][0] == device.default_memory.kind


def test_memory_descriptions_refuse_bad_handles(plugin_api, client):
    ext = Ext(plugin_api, MEMORY_DESCRIPTIONS, ["list", "kind"])
    bad = P.ErrorCode.INVALID_ARGUMENT
    _raises(ext, "list", MemoryDescriptions(device_description=client.ptr), bad,
            "PJRT_DeviceDescription_MemoryDescriptions", "not a")
    _raises(ext, "kind", MemoryKind(description=None), bad, "PJRT_MemoryDescription_Kind", "null")
    _raises(ext, "kind", MemoryKind(description=client.ptr), bad, "PJRT_MemoryDescription_Kind", "not one")
