"""PJRT C API: plugin table, client, devices, memories, topology, memory stats.

Everything goes through the plugin's C entry points with our ctypes client, so
these tests see exactly what a framework sees.
"""

import ctypes

import numpy as np
import pytest

import pjrt_capi as P
from assertions import pjrt_error
import pjrt_neuron

INVALID = P.ErrorCode.INVALID_ARGUMENT
GIB = 1 << 30






def _topology_descriptions(api, topology):
    a = api.call("PJRT_TopologyDescription_GetDeviceDescriptions", topology=topology)
    return P._ptr_array(a.descriptions, a.num_descriptions)


def _description_id(api, desc):
    return api.call("PJRT_DeviceDescription_Id", device_description=desc).id


def _description_attributes(api, desc):
    a = api.call("PJRT_DeviceDescription_Attributes", device_description=desc)
    return P._named_values_out(a.attributes, a.num_attributes)


def _topology_attributes(api, topology):
    a = api.call("PJRT_TopologyDescription_Attributes", topology=topology)
    return P._named_values_out(a.attributes, a.num_attributes)


def _topology_string(api, fn, out, topology):
    a = api.call(fn, topology=topology)
    return P._string_at(getattr(a, out), getattr(a, out + "_size"))


# --------------------------------------------------------------------------
# The PJRT_Api table
# --------------------------------------------------------------------------

def test_api_version_is_the_newest_minor_served(plugin_api):
    # The header's table (0.81) and the 20 slots added up to 0.114 (plugin/src/api/newer_c_api.h).
    assert P.HEADER_VERSION == (0, 81)
    assert plugin_api.version == (0, 114)
    assert plugin_api.struct_size == P.STRUCT_SIZES["PJRT_Api"] + 20 * 8


def test_every_api_slot_is_non_null(plugin_api):
    # A null slot makes frameworks crash on a call they expect to exist.
    missing = [fn for fn in P.API_FUNCTIONS if not plugin_api.has(fn)]
    assert missing == []


@pytest.mark.parametrize("fn", [
    "PJRT_Client_DmaMap",
    "PJRT_Client_CreateViewOfDeviceBuffer",
    "PJRT_CopyToDeviceStream_TotalBytes",
])
def test_not_implemented_slot_returns_unimplemented_naming_the_function(plugin_api, client, fn):
    fields = {"client": client.ptr} if "client" in P._field_names(P.Api.args_type(fn)) else {}
    with pjrt_error(P.ErrorCode.UNIMPLEMENTED, fn):
        plugin_api.call(fn, **fields)


def test_plugin_attributes_carry_stablehlo_versions_and_plugin_version(plugin_api, engine_api):
    attrs = plugin_api.plugin_attributes()
    for key in ("stablehlo_current_version", "stablehlo_minimum_version"):
        value = attrs[key]
        assert isinstance(value, list) and len(value) == 3
        assert all(isinstance(v, int) and v >= 0 for v in value)
    assert attrs["stablehlo_minimum_version"] <= attrs["stablehlo_current_version"]
    assert attrs["pjrt_neuron_version"] == pjrt_neuron.__version__
    # JAX serialises StableHLO for the versions named here; the engine decides them.
    stock = engine_api.plugin_attributes()
    assert attrs["stablehlo_current_version"] == stock["stablehlo_current_version"]
    assert attrs["stablehlo_minimum_version"] == stock["stablehlo_minimum_version"]


# --------------------------------------------------------------------------
# Client and devices
# --------------------------------------------------------------------------

def test_platform_name_is_neuron(client):
    assert client.platform_name == "neuron"


def test_platform_version_names_plugin_instance_and_engine(client, engine_api):
    version = client.platform_version
    assert "pjrt-neuron" in version
    assert pjrt_neuron.__version__ in version
    assert "trn1.2xlarge" in version
    major, minor = engine_api.version
    assert "XLA CPU" in version and f"(PJRT {major}.{minor}," in version


def test_process_index_is_zero(client):
    assert client.process_index == 0
    assert [d.process_index for d in client.devices()] == [0, 0]


def test_devices_equal_addressable_devices(client):
    devices = client.devices()
    assert [d.id for d in devices] == [0, 1]
    assert [d.ptr for d in devices] == [d.ptr for d in client.addressable_devices()]
    assert all(d.is_addressable for d in devices)


def test_lookup_device_by_id_returns_the_listed_device(client):
    for device in client.devices():
        assert client.lookup_device(device.id).ptr == device.ptr


def test_lookup_addressable_device_by_local_hardware_id(client):
    devices = client.devices()
    assert [d.local_hardware_id for d in devices] == [0, 1]
    for device in devices:
        assert client.lookup_addressable_device(device.local_hardware_id).ptr == device.ptr


@pytest.mark.parametrize("bad_id", [2, 7, -1])
def test_lookup_unknown_device_id_is_invalid_argument_naming_the_id(client, bad_id):
    with pjrt_error(INVALID, "PJRT_Client_LookupDevice", str(bad_id)):
        client.lookup_device(bad_id)


@pytest.mark.parametrize("bad_id", [2, 5, -1])
def test_lookup_unknown_local_hardware_id_is_invalid_argument_naming_the_id(client, bad_id):
    with pjrt_error(INVALID, "PJRT_Client_LookupAddressableDevice", str(bad_id)):
        client.lookup_addressable_device(bad_id)


def test_device_kind_strings_and_attributes(client):
    for index, device in enumerate(client.devices()):
        assert device.kind == "NeuronCore-v2"
        assert "NeuronCore" in device.to_string and str(index) in device.to_string
        assert "trn1.2xlarge" in device.debug_string
        assert device.attributes() == {
            "coords": [0, 0, 0],
            "chip_index": 0,
            "core_on_chip": index,
            "chip_coords": [0],
            "hbm_bytes": 16 * GIB,
            "instance_type": "trn1.2xlarge",
            "logical_nc_config": 1,
        }


def test_device_default_memory_is_device_kind_and_addressable_by_its_device(client):
    for device in client.devices():
        memory = device.default_memory
        assert memory.kind == "device"
        # HBM first, then host memory pinned for offload, each attached to this core only.
        memories = device.addressable_memories
        assert [m.kind for m in memories] == ["device", "pinned_host"]
        assert memories[0].ptr == memory.ptr
        for m in memories:
            assert [d.ptr for d in m.addressable_by_devices] == [device.ptr]
        assert memory.to_string and memory.debug_string
        assert memory.kind_id == client.devices()[0].default_memory.kind_id


def test_client_addressable_memories_are_the_devices_memories(client):
    memories = client.addressable_memories()
    assert [m.ptr for m in memories] == [m.ptr for d in client.devices() for m in d.addressable_memories]
    assert len({m.id for m in memories}) == len(memories)
    assert [m.kind for m in memories] == ["device", "pinned_host"] * len(client.devices())


def test_default_device_assignment(client):
    assert client.default_device_assignment(1) == [0]
    assert sorted(client.default_device_assignment(2)) == [0, 1]
    with pjrt_error(INVALID, "PJRT_Client_DefaultDeviceAssignment", "3"):
        client.default_device_assignment(3)


# --------------------------------------------------------------------------
# Topology
# --------------------------------------------------------------------------

def test_client_topology_describes_the_instance(plugin_api, client):
    topology = plugin_api.call("PJRT_Client_TopologyDescription", client=client).topology
    assert _topology_string(plugin_api, "PJRT_TopologyDescription_PlatformName",
                            "platform_name", topology) == "neuron"
    assert "pjrt-neuron" in _topology_string(
        plugin_api, "PJRT_TopologyDescription_PlatformVersion", "platform_version", topology)
    descriptions = _topology_descriptions(plugin_api, topology)
    assert [_description_id(plugin_api, d) for d in descriptions] == [0, 1]
    for desc in descriptions:
        assert _description_attributes(plugin_api, desc)["instance_type"] == "trn1.2xlarge"
    attrs = _topology_attributes(plugin_api, topology)
    assert attrs["instance_type"] == "trn1.2xlarge"
    assert attrs["chips"] * attrs["cores_per_chip"] == 2


def test_destroying_a_client_owned_topology_is_refused(plugin_api, client):
    topology = plugin_api.call("PJRT_Client_TopologyDescription", client=client).topology
    with pjrt_error(INVALID, "PJRT_TopologyDescription_Destroy", "client"):
        plugin_api.call("PJRT_TopologyDescription_Destroy", topology=topology)
    # Still alive and usable afterwards.
    assert len(_topology_descriptions(plugin_api, topology)) == 2


def test_topology_create_trn1_32xlarge_has_32_descriptions(plugin_api):
    name = b"trn1.32xlarge"
    topology = plugin_api.call("PJRT_TopologyDescription_Create", topology_name=name,
                               topology_name_size=len(name)).topology
    try:
        descriptions = _topology_descriptions(plugin_api, topology)
        assert [_description_id(plugin_api, d) for d in descriptions] == list(range(32))
        last = _description_attributes(plugin_api, descriptions[-1])
        assert last["instance_type"] == "trn1.32xlarge"
        assert (last["chip_index"], last["core_on_chip"]) == (15, 1)
        assert _topology_attributes(plugin_api, topology)["instance_type"] == "trn1.32xlarge"
    finally:
        plugin_api.call("PJRT_TopologyDescription_Destroy", topology=topology)


def test_topology_create_unknown_name_lists_known_ones(plugin_api):
    name = b"trn9.mega"
    with pjrt_error(INVALID, "PJRT_TopologyDescription_Create", "trn9.mega", "trn1.32xlarge"):
        plugin_api.call("PJRT_TopologyDescription_Create", topology_name=name,
                        topology_name_size=len(name))


# --------------------------------------------------------------------------
# Create options
# --------------------------------------------------------------------------

def test_unknown_create_option_is_invalid_argument(plugin_api):
    with pjrt_error(INVALID, "PJRT_Client_Create", "bogus_option", "instance_type"):
        P.Client(plugin_api, {"bogus_option": 1})


def test_create_option_with_wrong_type_is_invalid_argument(plugin_api):
    with pjrt_error(INVALID, "PJRT_Client_Create", "instance_type", "string"):
        P.Client(plugin_api, {"instance_type": 32})


@pytest.mark.parametrize("instance, count, kind, hbm", [
    ("trn1.32xlarge", 32, "NeuronCore-v2", 16 * GIB),
    ("trn2.48xlarge", 64, "NeuronCore-v3", 24 * GIB),
])
def test_create_option_instance_type_sets_the_devices(plugin_api, instance, count, kind, hbm):
    with P.Client(plugin_api, {"instance_type": instance}) as c:
        devices = c.devices()
        assert [d.id for d in devices] == list(range(count))
        assert {d.kind for d in devices} == {kind}
        assert devices[-1].attributes()["instance_type"] == instance
        assert devices[-1].attributes()["hbm_bytes"] == hbm
        assert devices[-1].memory_stats()["bytes_limit"] == hbm
        assert c.lookup_device(count - 1).ptr == devices[-1].ptr
        assert instance in c.platform_version


def test_unknown_instance_type_lists_known_ones(plugin_api):
    with pjrt_error(INVALID, "PJRT_Client_Create", "trn9.mega", "trn1.2xlarge", "trn1.32xlarge"):
        P.Client(plugin_api, {"instance_type": "trn9.mega"})


def test_old_client_create_args_without_kv_try_get_fields(plugin_api):
    # Callers built against an older header send a struct that ends at `client`.
    old_size = P.PJRT_Client_Create_Args.kv_try_get_callback.offset
    a = plugin_api.call("PJRT_Client_Create", struct_size=old_size)
    try:
        n = plugin_api.call("PJRT_Client_Devices", client=a.client).num_devices
        assert n == 2
    finally:
        plugin_api.call("PJRT_Client_Destroy", client=a.client)


# --------------------------------------------------------------------------
# Memory statistics
# --------------------------------------------------------------------------

def test_memory_stats_before_allocation(client):
    for device in client.devices():
        assert device.memory_stats() == {
            "bytes_in_use": 0, "peak_bytes_in_use": 0, "num_allocs": 0,
            "largest_alloc_size": 0, "bytes_limit": 16 * GIB,
            "bytes_reserved": 0, "peak_bytes_reserved": 0,
            "bytes_reservable_limit": 16 * GIB, "largest_free_block_bytes": 16 * GIB,
        }


def test_memory_stats_count_allocation_and_delete(client):
    d0, d1 = client.devices()
    buf = client.buffer_from_numpy(np.zeros((3, 4), np.float32), device=d0)
    assert d0.memory_stats() == {
        "bytes_in_use": 48, "peak_bytes_in_use": 48, "num_allocs": 1,
        "largest_alloc_size": 48, "bytes_limit": 16 * GIB,
        "bytes_reserved": 48, "peak_bytes_reserved": 48,
        "bytes_reservable_limit": 16 * GIB, "largest_free_block_bytes": 16 * GIB - 48,
    }
    assert d1.memory_stats()["bytes_in_use"] == 0
    small = client.buffer_from_numpy(np.zeros(5, np.int16), device=d0)
    stats = d0.memory_stats()
    assert (stats["bytes_in_use"], stats["num_allocs"], stats["largest_alloc_size"]) == (58, 2, 48)
    buf.delete()
    stats = d0.memory_stats()
    # Deleting frees the bytes; peak, count and largest are history.
    assert (stats["bytes_in_use"], stats["peak_bytes_in_use"], stats["num_allocs"],
            stats["largest_alloc_size"]) == (10, 58, 2, 48)
    buf.destroy()
    small.destroy()
    assert d0.memory_stats()["bytes_in_use"] == 0


def test_memory_stats_follow_copies_to_the_other_core(client):
    d0, d1 = client.devices()
    buf = client.buffer_from_numpy(np.zeros(100, np.float64), device=d0)
    copy = buf.copy_to_device(d1)
    assert d0.memory_stats()["bytes_in_use"] == 800
    assert d1.memory_stats()["bytes_in_use"] == 800
    assert d1.memory_stats()["num_allocs"] == 1
    copy.destroy()
    assert d1.memory_stats()["bytes_in_use"] == 0
    assert d0.memory_stats()["bytes_in_use"] == 800


def _stats_struct_filled(pattern: int):
    cls = P.STRUCTS["PJRT_Device_MemoryStats_Args"]
    args = cls()
    ctypes.memset(ctypes.addressof(args), pattern, ctypes.sizeof(args))
    return cls, args


def test_memory_stats_clears_is_set_of_stats_it_does_not_report(plugin_api, client):
    # XLA's C API client does not zero this struct: every *_is_set is an output
    # the plugin must write, or the caller reads stack garbage as a statistic.
    cls, args = _stats_struct_filled(0x5A)
    args.struct_size = P.STRUCT_SIZES["PJRT_Device_MemoryStats_Args"]
    args.extension_start = None
    args.device = client.devices()[0].ptr
    plugin_api.call_args("PJRT_Device_MemoryStats", args)
    assert args.bytes_in_use == 0
    assert args.bytes_limit_is_set and args.bytes_limit == 16 * GIB
    # The simulated HBM reserves what is in use; it has no pools.
    assert args.bytes_reserved_is_set and args.bytes_reserved == 0
    assert args.largest_free_block_bytes_is_set and args.largest_free_block_bytes == 16 * GIB
    unreported = ["pool_bytes", "peak_pool_bytes"]
    wrongly_set = [name for name in unreported if getattr(args, name + "_is_set")]
    assert wrongly_set == []


def test_memory_stats_old_struct_size_writes_only_bytes_in_use(plugin_api, client):
    # An old caller's struct ends after bytes_in_use; nothing past it may be written.
    cls, args = _stats_struct_filled(0x5A)
    args.struct_size = cls.bytes_in_use.offset + 8
    args.extension_start = None
    args.device = client.devices()[0].ptr
    plugin_api.call_args("PJRT_Device_MemoryStats", args)
    assert args.bytes_in_use == 0
    tail = ctypes.string_at(ctypes.addressof(args) + args.struct_size,
                            ctypes.sizeof(cls) - args.struct_size)
    assert tail == b"\x5a" * len(tail)
