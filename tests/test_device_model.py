"""The NeuronCore device model: instance types, which cores a process gets and how
processes share them, HBM accounting, pinned_host memory and `pjrt-neuron ls`.

Expected values come from the public AWS instance descriptions, not from the
plugin's own table: trn1.2xlarge has 1 chip x 2 NeuronCore-v2 with 16 GiB each;
trn1(n).32xlarge 16 such chips in a 4x4 2D torus; trn2.48xlarge 16 chips of
NeuronCore-v3, 64 logical cores with NEURON_LOGICAL_NC_CONFIG=2 (24 GiB each)
or 128 with 1 (12 GiB each); inf2 1, 6 or 12 chips x 2 cores, 16 GiB each.

Processes that compete for cores get their own lock directory
(PJRT_NEURON_LOCK_DIR), never the session's: this pytest process's JAX backend
may hold the session's trn1.2xlarge cores.
"""

import contextlib
import ctypes
import gc
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import pjrt_capi as P
from programs import PER_REPLICA
from assertions import pjrt_error
from pjrt_neuron import config, instance as instance_info

REPO = Path(__file__).resolve().parents[1]
CLAIM_SCRIPT = Path(__file__).resolve().parent / "device_model_scripts" / "claim_cores.py"

GIB = 1 << 30
INVALID = P.ErrorCode.INVALID_ARGUMENT
EXHAUSTED = P.ErrorCode.RESOURCE_EXHAUSTED

KNOWN_INSTANCES = ["trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge",
                   "inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge"]

# name: (chips, cores per chip, device kind, HBM per core, chip links), default NeuronCore config.
INSTANCES = {
    "trn1.2xlarge": (1, 2, "NeuronCore-v2", 16 * GIB, "none"),
    "trn1.32xlarge": (16, 2, "NeuronCore-v2", 16 * GIB, "2d-torus"),
    "trn1n.32xlarge": (16, 2, "NeuronCore-v2", 16 * GIB, "2d-torus"),
    "trn2.48xlarge": (16, 4, "NeuronCore-v3", 24 * GIB, "2d-torus"),
    "inf2.xlarge": (1, 2, "NeuronCore-v2", 16 * GIB, "none"),
    "inf2.8xlarge": (1, 2, "NeuronCore-v2", 16 * GIB, "none"),
    "inf2.24xlarge": (6, 2, "NeuronCore-v2", 16 * GIB, "ring"),
    "inf2.48xlarge": (12, 2, "NeuronCore-v2", 16 * GIB, "ring"),
}
DEFAULT_LNC = {"trn2.48xlarge": 2}


def _coords(links, chip):
    return [chip % 4, chip // 4] if links == "2d-torus" else [chip]


def _neighbours(links, chip, chips):
    """Chips one link away: left/right/up/down on the 4-wide torus, both sides on the ring."""
    if links == "2d-torus":
        x, y, h = chip % 4, chip // 4, chips // 4
        near = {y * 4 + (x + 1) % 4, y * 4 + (x - 1) % 4, ((y + 1) % h) * 4 + x, ((y - 1) % h) * 4 + x}
    elif links == "ring":
        near = {(chip + 1) % chips, (chip - 1) % chips}
    else:
        near = set()
    return sorted(near - {chip})


def _expected_attributes(name, core, lnc=None):
    chips, per_chip, _, hbm, links = INSTANCES[name]
    if lnc == 1 and name == "trn2.48xlarge":
        per_chip, hbm = 8, 12 * GIB
    chip = core // per_chip
    return {
        "coords": (_coords(links, chip) + [0, 0])[:3],
        "chip_index": chip,
        "core_on_chip": core % per_chip,
        "chip_coords": _coords(links, chip),
        "hbm_bytes": hbm,
        "instance_type": name,
        "logical_nc_config": lnc or DEFAULT_LNC.get(name, 1),
    }


def _zero_stats(limit):
    return {"bytes_in_use": 0, "peak_bytes_in_use": 0, "num_allocs": 0, "largest_alloc_size": 0,
            "bytes_limit": limit, "bytes_reserved": 0, "peak_bytes_reserved": 0,
            "bytes_reservable_limit": limit, "largest_free_block_bytes": limit}




@pytest.fixture
def instance_env(monkeypatch):
    """No instance / core-selection variables from the outside; tests set their own."""
    for name in ("PJRT_NEURON_INSTANCE_TYPE", "NEURON_LOGICAL_NC_CONFIG", "NEURON_RT_VISIBLE_CORES",
                 "NEURON_RT_NUM_CORES"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def lock_dir(instance_env):
    """A lock directory of this test's own, for this process and the subprocesses it starts."""
    path = tempfile.mkdtemp(prefix="pjrt-neuron-device-model-")
    instance_env.setenv("PJRT_NEURON_LOCK_DIR", path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _subprocess_env(lock_dir, **extra):
    env = dict(os.environ)
    for name in ("PJRT_NEURON_INSTANCE_TYPE", "NEURON_LOGICAL_NC_CONFIG", "NEURON_RT_VISIBLE_CORES",
                 "NEURON_RT_NUM_CORES"):
        env.pop(name, None)
    env["PJRT_NEURON_LOCK_DIR"] = lock_dir
    env.update(extra)
    return env


def claim_in_subprocess(lock_dir, options=None, **env):
    """Create a client in a new process; its JSON report (devices, or error code and message)."""
    proc = subprocess.run([sys.executable, str(CLAIM_SCRIPT), json.dumps(options or {})], cwd=REPO,
                          env=_subprocess_env(lock_dir, **env), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


class Holder:
    """A process holding NeuronCores until released (stdin closed) or killed."""

    def __init__(self, lock_dir, options=None, **env):
        self.proc = subprocess.Popen(
            [sys.executable, str(CLAIM_SCRIPT), "--hold", json.dumps(options or {})], cwd=REPO,
            env=_subprocess_env(lock_dir, **env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        try:
            ready, _, _ = select.select([self.proc.stdout], [], [], 60)
            assert ready, "the core-holding process did not report within 60 s"
            line = self.proc.stdout.readline()
            assert line, f"the core-holding process died: {self.proc.stderr.read()}"
            self.report = json.loads(line)
            assert "devices" in self.report, self.report
        except BaseException:
            self.__exit__()
            raise

    def release(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)

    def kill(self):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(Exception):
                stream.close()


def holders(instance):
    """{core: pid} of the cores held right now (in $PJRT_NEURON_LOCK_DIR), as `pjrt-neuron ls -w` sees them."""
    description = instance_info.describe(instance)
    return {h["core"]: h["pid"] for chip in description["chips"] for h in chip["holders"]}


# ==========================================================================
# 1. Instance types: devices, attributes, topology
# ==========================================================================

@pytest.mark.parametrize("via", ["option", "env"])
@pytest.mark.parametrize("name", KNOWN_INSTANCES)
def test_instance_type_devices_and_attributes(plugin_api, instance_env, name, via):
    chips, per_chip, kind, hbm, _ = INSTANCES[name]
    options = {"instance_type": name} if via == "option" else {}
    if via == "env":
        instance_env.setenv("PJRT_NEURON_INSTANCE_TYPE", name)
    with P.Client(plugin_api, options) as c:
        devices = c.devices()
        n = chips * per_chip
        assert [d.id for d in devices] == list(range(n))
        assert [d.local_hardware_id for d in devices] == list(range(n))
        assert [d.id for d in c.addressable_devices()] == list(range(n))
        assert {d.kind for d in devices} == {kind}
        for core in sorted({0, per_chip - 1, per_chip, n - 1} & set(range(n))):
            d = devices[core]
            want = _expected_attributes(name, core)
            assert d.attributes() == want
            assert d.to_string == f"NeuronCore(id={core}, chip={want['chip_index']}, core={want['core_on_chip']})"
            assert d.memory_stats() == _zero_stats(hbm)
            assert [m.kind for m in d.addressable_memories] == ["device", "pinned_host"]
        assert name in c.platform_version


@pytest.mark.parametrize("via", ["option", "env"])
def test_trn2_with_logical_nc_config_1_has_128_cores_of_12_gib(plugin_api, instance_env, via):
    if via == "option":
        options = {"instance_type": "trn2.48xlarge", "logical_nc_config": 1}
    else:
        instance_env.setenv("PJRT_NEURON_INSTANCE_TYPE", "trn2.48xlarge")
        instance_env.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
        options = {}
    with P.Client(plugin_api, options) as c:
        devices = c.devices()
        assert [d.id for d in devices] == list(range(128))
        assert {d.kind for d in devices} == {"NeuronCore-v3"}
        for core in (0, 7, 8, 127):
            assert devices[core].attributes() == _expected_attributes("trn2.48xlarge", core, lnc=1)
        assert devices[127].attributes()["chip_index"] == 15
        assert devices[127].attributes()["core_on_chip"] == 7
        assert devices[5].memory_stats()["bytes_limit"] == 12 * GIB


def test_trn2_logical_nc_config_2_is_its_default(plugin_api, instance_env):
    with P.Client(plugin_api, {"instance_type": "trn2.48xlarge", "logical_nc_config": 2}) as c:
        devices = c.devices()
        assert len(devices) == 64
        assert devices[63].attributes() == _expected_attributes("trn2.48xlarge", 63, lnc=2)
        assert devices[63].memory_stats()["bytes_limit"] == 24 * GIB


@pytest.mark.parametrize("name", ["trn1.2xlarge", "trn1.32xlarge", "inf2.48xlarge"])
@pytest.mark.parametrize("via", ["option", "env"])
def test_logical_nc_config_2_on_neuroncore_v2_is_invalid(plugin_api, instance_env, name, via):
    if via == "option":
        options = {"instance_type": name, "logical_nc_config": 2}
    else:
        instance_env.setenv("PJRT_NEURON_INSTANCE_TYPE", name)
        instance_env.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
        options = {}
    with pjrt_error(INVALID, "PJRT_Client_Create", "NEURON_LOGICAL_NC_CONFIG=2", f"not valid on {name}",
                    "NeuronCore-v2", "allowed: 1"):
        P.Client(plugin_api, options)


def test_logical_nc_config_3_on_trn2_is_invalid(plugin_api, instance_env):
    with pjrt_error(INVALID, "NEURON_LOGICAL_NC_CONFIG=3", "not valid on trn2.48xlarge", "allowed: 1 or 2"):
        P.Client(plugin_api, {"instance_type": "trn2.48xlarge", "logical_nc_config": 3})


@pytest.mark.parametrize("value", ["two", "0", "-1"])
def test_logical_nc_config_env_must_be_a_positive_integer(plugin_api, instance_env, value):
    instance_env.setenv("NEURON_LOGICAL_NC_CONFIG", value)
    with pjrt_error(INVALID, f"NEURON_LOGICAL_NC_CONFIG='{value}' is not a positive integer"):
        P.Client(plugin_api)


@pytest.mark.parametrize("via", ["option", "env"])
def test_unknown_instance_type_lists_the_known_ones(plugin_api, instance_env, via):
    if via == "env":
        instance_env.setenv("PJRT_NEURON_INSTANCE_TYPE", "trn9.mega")
    options = {"instance_type": "trn9.mega"} if via == "option" else {}
    with pjrt_error(INVALID, "PJRT_Client_Create", "unknown instance type 'trn9.mega'",
                    "known: " + ", ".join(KNOWN_INSTANCES)):
        P.Client(plugin_api, options)


def test_create_option_overrides_the_environment(plugin_api, instance_env):
    instance_env.setenv("PJRT_NEURON_INSTANCE_TYPE", "trn1.32xlarge")
    with P.Client(plugin_api, {"instance_type": "inf2.xlarge"}) as c:
        assert len(c.devices()) == 2
        assert c.devices()[0].attributes()["instance_type"] == "inf2.xlarge"


def _topology_attributes(api, topology):
    a = api.call("PJRT_TopologyDescription_Attributes", topology=topology)
    return P._named_values_out(a.attributes, a.num_attributes)


def _topology_descriptions(api, topology):
    a = api.call("PJRT_TopologyDescription_GetDeviceDescriptions", topology=topology)
    out = []
    for desc in P._ptr_array(a.descriptions, a.num_descriptions):
        ident = api.call("PJRT_DeviceDescription_Id", device_description=desc).id
        kind = api.call("PJRT_DeviceDescription_Kind", device_description=desc)
        attrs = api.call("PJRT_DeviceDescription_Attributes", device_description=desc)
        out.append((ident, P._string_at(kind.device_kind, kind.device_kind_size),
                    P._named_values_out(attrs.attributes, attrs.num_attributes)))
    return out


@contextlib.contextmanager
def created_topology(api, name, options=None):
    arr, n, keep = P._named_values_in(options)
    raw = name.encode()
    topology = api.call("PJRT_TopologyDescription_Create", topology_name=raw, topology_name_size=len(raw),
                        create_options=arr, num_options=n).topology
    del keep
    try:
        yield topology
    finally:
        api.call("PJRT_TopologyDescription_Destroy", topology=topology)


@pytest.mark.parametrize("name, lnc, cores", [
    ("trn1.2xlarge", None, 2),
    ("trn1n.32xlarge", None, 32),
    ("trn2.48xlarge", None, 64),
    ("trn2.48xlarge", 1, 128),
    ("trn2.48xlarge", 2, 64),
    ("inf2.24xlarge", None, 12),
])
def test_topology_create_for_a_named_instance(plugin_api, instance_env, name, lnc, cores):
    chips, per_chip, kind, hbm, links = INSTANCES[name]
    if lnc == 1:
        per_chip, hbm = 8, 12 * GIB
    options = {"logical_nc_config": lnc} if lnc else None
    with created_topology(plugin_api, name, options) as topology:
        assert _topology_attributes(plugin_api, topology) == {
            "instance_type": name, "chips": chips, "cores_per_chip": per_chip,
            "logical_nc_config": lnc or DEFAULT_LNC.get(name, 1), "core_generation": kind,
            "hbm_bytes_per_core": hbm, "chip_links": links,
        }
        descriptions = _topology_descriptions(plugin_api, topology)
        assert [d[0] for d in descriptions] == list(range(cores))
        assert {d[1] for d in descriptions} == {kind}
        for ident, _, attrs in (descriptions[0], descriptions[-1]):
            assert attrs == _expected_attributes(name, ident, lnc)


def test_topology_create_takes_the_instance_from_the_environment(plugin_api, instance_env):
    instance_env.setenv("PJRT_NEURON_INSTANCE_TYPE", "inf2.48xlarge")
    with created_topology(plugin_api, "") as topology:
        attrs = _topology_attributes(plugin_api, topology)
        assert (attrs["instance_type"], attrs["chips"], attrs["chip_links"]) == ("inf2.48xlarge", 12, "ring")
        assert len(_topology_descriptions(plugin_api, topology)) == 24


def test_a_named_topology_does_not_depend_on_the_environments_instance(plugin_api, instance_env):
    # The name overrides PJRT_NEURON_INSTANCE_TYPE, so an unusable value there must not matter.
    instance_env.setenv("PJRT_NEURON_INSTANCE_TYPE", "trn9.mega")
    with created_topology(plugin_api, "trn1.2xlarge") as topology:
        assert _topology_attributes(plugin_api, topology)["instance_type"] == "trn1.2xlarge"
        assert len(_topology_descriptions(plugin_api, topology)) == 2


@pytest.mark.parametrize("name, options, fragments", [
    ("trn9.mega", None, ["unknown instance type 'trn9.mega'", "known: " + ", ".join(KNOWN_INSTANCES)]),
    ("trn1.32xlarge", {"logical_nc_config": 2}, ["NEURON_LOGICAL_NC_CONFIG=2", "not valid on trn1.32xlarge"]),
])
def test_topology_create_errors(plugin_api, instance_env, name, options, fragments):
    with pjrt_error(INVALID, "PJRT_TopologyDescription_Create", *fragments):
        with created_topology(plugin_api, name, options):
            pass


def test_client_topology_describes_the_whole_instance_not_only_visible_cores(plugin_api, lock_dir):
    with P.Client(plugin_api, {"instance_type": "trn1.32xlarge", "visible_cores": "4-7"}) as c:
        topology = plugin_api.call("PJRT_Client_TopologyDescription", client=c).topology
        assert _topology_attributes(plugin_api, topology)["chips"] == 16
        assert [d[0] for d in _topology_descriptions(plugin_api, topology)] == list(range(32))
        assert [d.id for d in c.devices()] == [4, 5, 6, 7]


# ==========================================================================
# 2. Which cores: NEURON_RT_VISIBLE_CORES and NEURON_RT_NUM_CORES
# ==========================================================================

@pytest.mark.parametrize("name, value, ids", [
    ("trn1.2xlarge", "1", [1]),
    ("trn1.2xlarge", "0-1", [0, 1]),
    ("trn1.2xlarge", "0,1", [0, 1]),
    ("trn1.32xlarge", "4-7", [4, 5, 6, 7]),
    ("trn1.32xlarge", "0-1,2-3", [0, 1, 2, 3]),
    ("trn1.32xlarge", "31", [31]),
    ("trn2.48xlarge", "60-63", [60, 61, 62, 63]),
])
def test_visible_cores_select_the_devices(plugin_api, lock_dir, name, value, ids):
    per_chip = INSTANCES[name][1]
    with P.Client(plugin_api, {"instance_type": name, "visible_cores": value}) as c:
        devices = c.devices()
        assert [d.id for d in devices] == ids
        assert [d.attributes()["chip_index"] for d in devices] == [i // per_chip for i in ids]
        assert [d.attributes()["core_on_chip"] for d in devices] == [i % per_chip for i in ids]
        assert c.lookup_device(ids[-1]).ptr == devices[-1].ptr
        assert c.default_device_assignment(len(ids)) == ids
        # The local hardware id is the physical core index on the instance, like the device id.
        assert [d.local_hardware_id for d in devices] == ids
        assert c.lookup_addressable_device(ids[-1]).ptr == devices[-1].ptr


def test_visible_cores_4_to_7_on_trn1_32xlarge(plugin_api, lock_dir):
    with P.Client(plugin_api, {"instance_type": "trn1.32xlarge", "visible_cores": "4-7"}) as c:
        devices = c.devices()
        assert [d.id for d in devices] == [4, 5, 6, 7]
        assert [d.attributes()["chip_index"] for d in devices] == [2, 2, 3, 3]
        assert [d.attributes()["core_on_chip"] for d in devices] == [0, 1, 0, 1]
        assert [d.attributes()["chip_coords"] for d in devices] == [[2, 0], [2, 0], [3, 0], [3, 0]]
        assert devices[1].to_string == "NeuronCore(id=5, chip=2, core=1)"
        for d in devices:
            assert [m.addressable_by_devices[0].id for m in d.addressable_memories] == [d.id, d.id]
        # Computations run where asked: one replica on the first visible core, two on the first two.
        one = c.compile(PER_REPLICA)
        assert [d.id for d in one.addressable_devices] == [4]
        x = c.buffer_from_numpy(np.array([1, 2], np.float32), device=devices[0])
        ((out,),) = one.execute([x])
        assert out.device.id == 4
        np.testing.assert_array_equal(out.to_numpy(), [1, 2])
        two = c.compile(PER_REPLICA, compile_options=P.compile_options_proto(num_replicas=2))
        assert [d.id for d in two.addressable_devices] == [4, 5]
        y = c.buffer_from_numpy(np.array([1, 2], np.float32), device=devices[1])
        outs = two.execute([[x], [y]])
        assert [row[0].device.id for row in outs] == [4, 5]
        np.testing.assert_array_equal(outs[1][0].to_numpy(), [2, 3])
        # Local hardware ids are the physical core indices too.
        assert [d.local_hardware_id for d in devices] == [4, 5, 6, 7]
        assert c.lookup_addressable_device(6).ptr == devices[2].ptr


def test_lookup_of_a_core_that_is_not_visible_names_the_visible_ones(plugin_api, lock_dir):
    with P.Client(plugin_api, {"instance_type": "trn1.32xlarge", "visible_cores": "4-7"}) as c:
        with pjrt_error(INVALID, "no NeuronCore with id 0") as info:
            c.lookup_device(0)
        # The client's ids are 4..7; the message must not claim 0..3.
        assert "4" in info.value.message and "7" in info.value.message, info.value.message


@pytest.mark.parametrize("name, value, why", [
    ("trn1.2xlarge", "", "no cores listed"),
    ("trn1.2xlarge", "a", "'a' is not a core index or a range like 0-3"),
    ("trn1.2xlarge", "-1", "'-1' is not a core index or a range like 0-3"),
    ("trn1.2xlarge", "0,,1", "'' is not a core index or a range like 0-3"),
    ("trn1.2xlarge", "1-0", "range '1-0' ends before it starts"),
    ("trn1.32xlarge", "0,2", "cores must be contiguous and ascending (core 2 follows core 0)"),
    ("trn1.32xlarge", "0-40", "core 40 does not exist; this instance has cores 0-31"),
    ("trn1.2xlarge", "1,0", "cores must be contiguous and ascending (core 0 follows core 1)"),
    ("trn1.2xlarge", "2", "core 2 does not exist; this instance has cores 0-1"),
])
def test_bad_visible_cores_are_invalid_argument(plugin_api, lock_dir, name, value, why):
    with pjrt_error(INVALID, "PJRT_Client_Create", f"NEURON_RT_VISIBLE_CORES='{value}': {why}"):
        P.Client(plugin_api, {"instance_type": name, "visible_cores": value})
    assert holders(name) == {}  # nothing claimed by the failed attempt


def test_num_cores_takes_the_first_contiguous_cores(plugin_api, lock_dir):
    with P.Client(plugin_api, {"instance_type": "trn1.32xlarge", "num_cores": 3}) as c:
        assert [d.id for d in c.devices()] == [0, 1, 2]
        assert [d.local_hardware_id for d in c.devices()] == [0, 1, 2]
        assert holders("trn1.32xlarge") == {0: os.getpid(), 1: os.getpid(), 2: os.getpid()}
    assert holders("trn1.32xlarge") == {}


def test_num_cores_agreeing_with_visible_cores(plugin_api, lock_dir):
    with P.Client(plugin_api, {"instance_type": "trn1.32xlarge", "visible_cores": "4-7", "num_cores": 4}) as c:
        assert [d.id for d in c.devices()] == [4, 5, 6, 7]


@pytest.mark.parametrize("via", ["option", "env"])
def test_num_cores_disagreeing_with_visible_cores(plugin_api, lock_dir, instance_env, via):
    if via == "option":
        options = {"visible_cores": "0-1", "num_cores": 1}
    else:
        instance_env.setenv("NEURON_RT_VISIBLE_CORES", "0-1")
        instance_env.setenv("NEURON_RT_NUM_CORES", "1")
        options = {}
    with pjrt_error(INVALID, "NEURON_RT_NUM_CORES=1 disagrees with NEURON_RT_VISIBLE_CORES='0-1' (2 cores)",
                    "set one of them"):
        P.Client(plugin_api, options)
    assert holders("trn1.2xlarge") == {}


def test_num_cores_beyond_the_instance(plugin_api, lock_dir):
    with pjrt_error(INVALID, "NEURON_RT_NUM_CORES=3 but trn1.2xlarge has 2 NeuronCores"):
        P.Client(plugin_api, {"num_cores": 3})
    with pjrt_error(INVALID, "create option 'num_cores' must be a positive integer"):
        P.Client(plugin_api, {"num_cores": 0})


@pytest.mark.parametrize("value", ["0", "x", "1.5"])
def test_num_cores_env_must_be_a_positive_integer(plugin_api, lock_dir, instance_env, value):
    instance_env.setenv("NEURON_RT_NUM_CORES", value)
    with pjrt_error(INVALID, f"NEURON_RT_NUM_CORES='{value}' is not a positive integer"):
        P.Client(plugin_api)


def test_core_selection_from_the_environment_in_a_new_process(lock_dir):
    visible = claim_in_subprocess(lock_dir, PJRT_NEURON_INSTANCE_TYPE="trn1.32xlarge",
                                  NEURON_RT_VISIBLE_CORES="4-7")
    assert [d["id"] for d in visible["devices"]] == [4, 5, 6, 7]
    assert [d["attributes"] for d in visible["devices"]] == [
        _expected_attributes("trn1.32xlarge", core) for core in (4, 5, 6, 7)]
    counted = claim_in_subprocess(lock_dir, PJRT_NEURON_INSTANCE_TYPE="trn1.32xlarge", NEURON_RT_NUM_CORES="3")
    assert [d["id"] for d in counted["devices"]] == [0, 1, 2]
    trn2 = claim_in_subprocess(lock_dir, PJRT_NEURON_INSTANCE_TYPE="trn2.48xlarge", NEURON_LOGICAL_NC_CONFIG="1",
                               NEURON_RT_VISIBLE_CORES="120-127")
    assert [d["attributes"] for d in trn2["devices"]] == [
        _expected_attributes("trn2.48xlarge", core, lnc=1) for core in range(120, 128)]
    bad = claim_in_subprocess(lock_dir, PJRT_NEURON_INSTANCE_TYPE="trn1.32xlarge", NEURON_RT_VISIBLE_CORES="0,2")
    assert bad["error"]["code"] == "INVALID_ARGUMENT"
    assert "NEURON_RT_VISIBLE_CORES='0,2': cores must be contiguous" in bad["error"]["message"]
    assert [d["local_hardware_id"] for d in visible["devices"]] == [4, 5, 6, 7]


# ==========================================================================
# 3. Processes competing for cores
# ==========================================================================

def _held_message(core, pid, instance="trn1.2xlarge"):
    return f"NeuronCore {core} of {instance} is already in use by process {pid}"


def test_a_core_held_by_another_process_is_refused_naming_core_and_pid(plugin_api, lock_dir):
    with Holder(lock_dir, {"visible_cores": "0"}) as holder:
        assert [d["id"] for d in holder.report["devices"]] == [0]
        assert holders("trn1.2xlarge") == {0: holder.pid}
        with pjrt_error(EXHAUSTED, "PJRT_Client_Create", _held_message(0, holder.pid), "NEURON_RT_VISIBLE_CORES"):
            P.Client(plugin_api, {"visible_cores": "0"})
        # All cores (the default) includes the held one.
        with pjrt_error(EXHAUSTED, _held_message(0, holder.pid)):
            P.Client(plugin_api)
        # NEURON_RT_NUM_CORES cannot find two contiguous free cores.
        with pjrt_error(EXHAUSTED, "no 2 contiguous free NeuronCores on trn1.2xlarge (NEURON_RT_NUM_CORES)",
                        str(holder.pid)):
            P.Client(plugin_api, {"num_cores": 2})
        # The failed attempts left nothing behind: core 1 is still free.
        assert holders("trn1.2xlarge") == {0: holder.pid}
        with P.Client(plugin_api, {"visible_cores": "1"}) as c:
            assert [d.id for d in c.devices()] == [1]
            assert holders("trn1.2xlarge") == {0: holder.pid, 1: os.getpid()}
        with P.Client(plugin_api, {"num_cores": 1}) as c:
            assert [d.id for d in c.devices()] == [1]
        assert holders("trn1.2xlarge") == {0: holder.pid}

        # The same through the environment, in a third process.
        refused = claim_in_subprocess(lock_dir, NEURON_RT_VISIBLE_CORES="0")
        assert refused["error"]["code"] == "RESOURCE_EXHAUSTED"
        assert _held_message(0, holder.pid) in refused["error"]["message"]
        picked = claim_in_subprocess(lock_dir, NEURON_RT_NUM_CORES="1")
        assert [d["id"] for d in picked["devices"]] == [1]

        holder.release()  # a clean exit gives the core back too
        assert holders("trn1.2xlarge") == {}
        with P.Client(plugin_api, {"visible_cores": "0"}) as c:
            assert [d.id for d in c.devices()] == [0]


def test_a_sigkilled_holder_releases_its_cores_at_once(plugin_api, lock_dir):
    with Holder(lock_dir) as holder:
        assert [d["id"] for d in holder.report["devices"]] == [0, 1]
        with pjrt_error(EXHAUSTED, "no 1 contiguous free NeuronCores on trn1.2xlarge", str(holder.pid)):
            P.Client(plugin_api, {"num_cores": 1})
        os.kill(holder.pid, signal.SIGKILL)
        holder.proc.wait(timeout=30)
        assert holder.proc.returncode == -signal.SIGKILL
        # No waiting, no stale-lock clean-up: the kernel dropped the locks with the process.
        with P.Client(plugin_api) as c:
            assert [d.id for d in c.devices()] == [0, 1]
            assert holders("trn1.2xlarge") == {0: os.getpid(), 1: os.getpid()}


def test_clients_of_one_process_share_their_cores(plugin_api, lock_dir):
    me = os.getpid()
    first = P.Client(plugin_api, {"visible_cores": "0"})
    second = P.Client(plugin_api)  # all cores, core 0 included
    try:
        assert [d.id for d in first.devices()] == [0]
        assert [d.id for d in second.devices()] == [0, 1]
        x = np.arange(6, dtype=np.int32)
        for c in (first, second):
            for d in c.devices():
                np.testing.assert_array_equal(c.buffer_from_numpy(x + d.id, device=d).to_numpy(), x + d.id)
        assert holders("trn1.2xlarge") == {0: me, 1: me}
        refused = claim_in_subprocess(lock_dir, {"visible_cores": "1"})
        assert _held_message(1, me) in refused["error"]["message"]
        second.close()  # core 1 had no other client; core 0 still has the first
        assert holders("trn1.2xlarge") == {0: me}
        np.testing.assert_array_equal(first.buffer_from_numpy(x).to_numpy(), x)
    finally:
        second.close()
        first.close()
    assert holders("trn1.2xlarge") == {}
    free = claim_in_subprocess(lock_dir)
    assert [d["id"] for d in free["devices"]] == [0, 1]


def test_locks_are_per_instance_type(plugin_api, lock_dir):
    with Holder(lock_dir, {"instance_type": "trn1.32xlarge", "visible_cores": "0-1"}) as holder:
        with P.Client(plugin_api, {"instance_type": "inf2.xlarge"}) as c:
            assert [d.id for d in c.devices()] == [0, 1]
        with pjrt_error(EXHAUSTED, _held_message(1, holder.pid, "trn1.32xlarge")):
            P.Client(plugin_api, {"instance_type": "trn1.32xlarge", "visible_cores": "1-2"})
        lock_file = Path(lock_dir, "trn1.32xlarge", "core-0.lock")
        assert lock_file.read_text().strip() == str(holder.pid)


# ==========================================================================
# 4. HBM accounting
# ==========================================================================

# Outputs (a 256 KiB matrix and a 1 KiB vector) and temporaries (the exp of a matmul).
PROGRAM = """
func.func @main(%a: tensor<256x256xf32>, %b: tensor<256x256xf32>)
    -> (tensor<256x256xf32>, tensor<256xf32>) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %1 = stablehlo.exponential %0 : tensor<256x256xf32>
  %2 = stablehlo.dot_general %1, %a, contracting_dims = [1] x [0]
      : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %3 = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [1]
      : (tensor<256x256xf32>, tensor<f32>) -> tensor<256xf32>
  return %2, %3 : tensor<256x256xf32>, tensor<256xf32>
}"""
MATRIX = (np.arange(256 * 256, dtype=np.float32).reshape(256, 256) % 7 - 3) / 256


def _reference(a):
    a64 = a.astype(np.float64)
    prod = a64 @ a64
    return np.exp(prod) @ a64, prod.sum(axis=1)


def _uninitialized(client, device, nbytes, element_type=P.BufferType.U8):
    dims = (ctypes.c_int64 * 1)(nbytes)
    a = client._call("PJRT_Client_CreateUninitializedBuffer", shape_dims=dims, shape_num_dims=1,
                     shape_element_type=element_type, device=device)
    return P.Buffer(client, a.buffer)


def _stats(in_use, peak, allocs, largest, limit):
    return {"bytes_in_use": in_use, "peak_bytes_in_use": peak, "num_allocs": allocs,
            "largest_alloc_size": largest, "bytes_limit": limit, "bytes_reserved": in_use,
            "peak_bytes_reserved": peak, "bytes_reservable_limit": limit,
            "largest_free_block_bytes": limit - in_use}


def test_allocation_beyond_hbm_is_refused_naming_core_request_and_usage(plugin_api, lock_dir):
    with P.Client(plugin_api, {"instance_type": "trn1.32xlarge", "visible_cores": "4-5"}) as c:
        d4, d5 = c.devices()
        kept = np.arange(1000, dtype=np.float32)
        x = c.buffer_from_numpy(kept, device=d5)
        before = d5.memory_stats()
        assert before == _stats(4000, 4000, 1, 4000, 16 * GIB)
        # 16 GiB more on a 16 GiB core that has 4000 bytes in use: refused before anything is allocated.
        with pjrt_error(EXHAUSTED, "PJRT_Client_CreateUninitializedBuffer", "NeuronCore 5 is out of HBM",
                        "needs 16 GiB", "4000 bytes of its 16 GiB are in use by 1 allocation(s)"):
            _uninitialized(c, d5, 4 * GIB, P.BufferType.F32)
        with pjrt_error(EXHAUSTED, "NeuronCore 5 is out of HBM", "needs 64 GiB"):
            _uninitialized(c, d5, 16 * GIB, P.BufferType.F32)
        # The process goes on: nothing was charged, the earlier buffer is intact, new ones fit.
        assert d5.memory_stats() == before
        assert d4.memory_stats() == _zero_stats(16 * GIB)
        np.testing.assert_array_equal(x.to_numpy(), kept)
        y = c.buffer_from_numpy(kept[:10], device=d5)
        assert d5.memory_stats()["bytes_in_use"] == 4040
        np.testing.assert_array_equal(y.to_numpy(), kept[:10])


def test_memory_stats_through_allocation_execution_and_delete(plugin_api, lock_dir):
    with P.Client(plugin_api) as c:
        d0, d1 = c.devices()
        limit = 16 * GIB
        assert d0.memory_stats() == _zero_stats(limit)
        a = c.buffer_from_numpy(MATRIX, device=d0)
        assert d0.memory_stats() == _stats(262144, 262144, 1, 262144, limit)

        executable = c.compile(PROGRAM)
        with executable.get_executable() as ex:
            compiled = ex.compiled_memory_stats()
        assert compiled["temp_size_in_bytes"] > 0
        transient = (compiled["temp_size_in_bytes"] + compiled["output_size_in_bytes"]
                     - compiled["alias_size_in_bytes"])
        assert d0.memory_stats()["bytes_in_use"] == 262144  # compiling allocates no HBM

        ((big, small),) = executable.execute([a, a])
        assert (big.on_device_size, small.on_device_size) == (262144, 1024)
        # Outputs stay charged; the peak also saw the temporaries while the program ran.
        in_use = 262144 + 262144 + 1024
        peak = 262144 + transient
        assert peak > in_use
        assert d0.memory_stats() == _stats(in_use, peak, 3, 262144, limit)
        assert d1.memory_stats() == _zero_stats(limit)
        want_big, want_small = _reference(MATRIX)
        np.testing.assert_allclose(big.to_numpy(), want_big, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(small.to_numpy(), want_small, rtol=1e-4, atol=1e-5)

        big.delete()
        assert d0.memory_stats() == _stats(262144 + 1024, peak, 3, 262144, limit)
        small.destroy()
        assert d0.memory_stats() == _stats(262144, peak, 3, 262144, limit)
        # A run on the other core (a portable executable) charges that core only.
        portable = c.compile(PROGRAM, compile_options=P.compile_options_proto(compile_portable_executable=True))
        b = a.copy_to_device(d1)
        ((big1, small1),) = portable.execute([b, b], execute_device=d1)
        assert big1.device.id == 1
        assert d1.memory_stats() == _stats(in_use, peak, 3, 262144, limit)
        assert d0.memory_stats() == _stats(262144, peak, 3, 262144, limit)
        for buf in (big1, small1, b):
            buf.destroy()
        a.delete()
        assert d0.memory_stats() == _stats(0, peak, 3, 262144, limit)
        assert d1.memory_stats() == _stats(0, peak, 3, 262144, limit)


def test_trn2_lnc1_cores_have_12_gib_and_runs_that_do_not_fit_are_refused(plugin_api, lock_dir):
    limit = 12 * GIB
    with P.Client(plugin_api, {"instance_type": "trn2.48xlarge", "logical_nc_config": 1,
                               "visible_cores": "0"}) as c:
        (d0,) = c.devices()
        assert d0.memory_stats() == _zero_stats(limit)
        with pjrt_error(EXHAUSTED, "NeuronCore 0 is out of HBM", "needs 12.00 GiB",
                        "0 bytes of its 12 GiB are in use by 0 allocation(s)"):
            _uninitialized(c, d0, limit + 1)
        a = c.buffer_from_numpy(MATRIX, device=d0)
        executable = c.compile(PROGRAM)
        with executable.get_executable() as ex:
            compiled = ex.compiled_memory_stats()
        transient = (compiled["temp_size_in_bytes"] + compiled["output_size_in_bytes"]
                     - compiled["alias_size_in_bytes"])
        # Leave one byte too few for the run's outputs and temporaries.  (The simulator allocates
        # uninitialized buffers lazily, so this does not take 12 GiB of host memory.)
        filler = _uninitialized(c, d0, limit - 262144 - transient + 1)
        before = d0.memory_stats()
        assert before["bytes_in_use"] == limit - transient + 1
        with pjrt_error(EXHAUSTED, "PJRT_LoadedExecutable_Execute", "NeuronCore 0 is out of HBM", "running '",
                        "of outputs", "of temporaries", "of its 12 GiB"):
            executable.execute([a, a])
        assert d0.memory_stats() == before
        np.testing.assert_array_equal(a.to_numpy(), MATRIX)
        filler.destroy()
        ((big, small),) = executable.execute([a, a])
        np.testing.assert_allclose(big.to_numpy(), _reference(MATRIX)[0], rtol=1e-4, atol=1e-6)
        # The limit is exact: filling to the last byte works, one more byte does not.
        rest = _uninitialized(c, d0, limit - d0.memory_stats()["bytes_in_use"])
        assert d0.memory_stats()["bytes_in_use"] == limit
        assert d0.memory_stats()["largest_free_block_bytes"] == 0
        with pjrt_error(EXHAUSTED, "PJRT_Client_BufferFromHostBuffer", "NeuronCore 0 is out of HBM",
                        "a host-to-device transfer needs 1 bytes"):
            c.buffer_from_numpy(np.zeros(1, np.uint8), device=d0)
        rest.destroy()
        assert d0.memory_stats()["bytes_in_use"] == 262144 + 262144 + 1024


# ==========================================================================
# 5. pinned_host memory
# ==========================================================================

def test_pinned_host_buffers_through_the_c_api(plugin_api, lock_dir):
    with P.Client(plugin_api) as c:
        d0, d1 = c.devices()
        hbm, pinned = d0.addressable_memories
        assert (hbm.kind, pinned.kind) == ("device", "pinned_host")
        assert d0.default_memory.ptr == hbm.ptr
        assert [d.id for d in pinned.addressable_by_devices] == [0]
        x = np.arange(24, dtype=np.float32).reshape(4, 6)
        host = c.buffer_from_numpy(x, memory=pinned)
        assert host.memory.kind == "pinned_host" and host.memory.ptr == pinned.ptr
        assert host.device.id == 0
        assert d0.memory_stats() == _zero_stats(16 * GIB)  # not HBM
        np.testing.assert_array_equal(host.to_numpy(), x)

        on_device = host.copy_to_memory(hbm)
        assert on_device.memory.kind == "device"
        assert d0.memory_stats()["bytes_in_use"] == x.nbytes
        np.testing.assert_array_equal(on_device.to_numpy(), x)
        back = on_device.copy_to_memory(pinned)
        assert back.memory.kind == "pinned_host"
        assert d0.memory_stats()["bytes_in_use"] == x.nbytes
        np.testing.assert_array_equal(back.to_numpy(), x)
        # To the other core's pinned host memory and on to its HBM.
        other = host.copy_to_memory(d1.addressable_memories[1])
        assert (other.device.id, other.memory.kind) == (1, "pinned_host")
        assert d1.memory_stats()["bytes_in_use"] == 0
        other_on_device = other.copy_to_memory(d1.default_memory)
        assert (other_on_device.device.id, other_on_device.memory.kind) == (1, "device")
        assert d1.memory_stats()["bytes_in_use"] == x.nbytes
        np.testing.assert_array_equal(other_on_device.to_numpy(), x)
        on_device.destroy()
        assert d0.memory_stats()["bytes_in_use"] == 0


def test_pinned_host_in_jax():
    import jax

    dev = jax.devices("neuron")[0]
    assert sorted(m.kind for m in dev.addressable_memories()) == ["device", "pinned_host"]
    pinned = jax.sharding.SingleDeviceSharding(dev, memory_kind="pinned_host")
    hbm = jax.sharding.SingleDeviceSharding(dev, memory_kind="device")
    x = np.arange(3 * 5 * 7, dtype=np.float32).reshape(3, 5, 7) / 3  # 420 bytes
    gc.collect()
    start = dev.memory_stats()["bytes_in_use"]

    on_host = jax.device_put(x, pinned)
    on_host.block_until_ready()
    assert on_host.sharding.memory_kind == "pinned_host"
    assert dev.memory_stats()["bytes_in_use"] == start
    np.testing.assert_array_equal(np.asarray(on_host), x)

    on_device = jax.device_put(on_host, hbm)
    on_device.block_until_ready()
    assert on_device.sharding.memory_kind == "device"
    assert dev.memory_stats()["bytes_in_use"] == start + x.nbytes
    np.testing.assert_array_equal(np.asarray(on_device), x)

    again = jax.device_put(on_device * 2, pinned)
    again.block_until_ready()
    assert again.sharding.memory_kind == "pinned_host"
    np.testing.assert_array_equal(np.asarray(again), x * 2)
    for arr in (on_host, on_device, again):
        arr.delete()
    gc.collect()
    assert dev.memory_stats()["bytes_in_use"] == start


def test_jit_outputs_placed_in_pinned_host(monkeypatch, tmp_path):
    """out_shardings with memory_kind="pinned_host": the CPU backend's values, the result in host
    memory (not charged to HBM), the other output on the device; the same again from the cache.
    The compatibility report says Trainium's support for it is unverified."""
    import jax

    report = tmp_path / "compat.jsonl"
    monkeypatch.setenv("PJRT_NEURON_COMPAT_REPORT", str(report))

    dev = jax.devices("neuron")[0]
    cpu = jax.devices("cpu")[0]
    pinned = jax.sharding.SingleDeviceSharding(dev, memory_kind="pinned_host")
    hbm = jax.sharding.SingleDeviceSharding(dev, memory_kind="device")
    x = np.arange(4 * 6, dtype=np.float32).reshape(4, 6) / 7

    def step(v):
        return jax.numpy.tanh(v) @ v.T, v * 3 + 1

    want = [np.asarray(a) for a in jax.jit(step)(jax.device_put(x, cpu))]
    for attempt in range(2):  # the second compile of the same program may come from the cache
        gc.collect()
        start = dev.memory_stats()["bytes_in_use"]
        arg = jax.device_put(x, hbm)
        offloaded, kept = jax.jit(step, out_shardings=(pinned, hbm))(arg)
        assert offloaded.sharding.memory_kind == "pinned_host", attempt
        assert kept.sharding.memory_kind == "device", attempt
        assert dev.memory_stats()["bytes_in_use"] == start + x.nbytes + kept.nbytes, attempt
        np.testing.assert_allclose(np.asarray(offloaded), want[0], rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(kept), want[1])
        for a in (arg, offloaded, kept):
            a.delete()
        jax.clear_caches()
    findings = [json.loads(line) for line in report.read_text().splitlines()]
    assert any(f["check"] == "host-offload-outputs" and "unverified" in f["why"] for f in findings), findings


# ==========================================================================
# 6. pjrt-neuron ls
# ==========================================================================

def run_ls(lock_dir, *args, **env):
    return subprocess.run([sys.executable, "-m", "pjrt_neuron", "ls", *args], cwd=REPO,
                          env=_subprocess_env(lock_dir, **env), capture_output=True, text=True, timeout=60)


def _parse_table(text):
    """(header lines, column names, rows of cells) of `pjrt-neuron ls` output."""
    lines = text.strip().splitlines()
    header = [line for line in lines if not line.startswith(("+", "|"))]
    table = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]
    return header, table[0], table[1:]


def _expected_rows(name, lnc=None):
    chips, per_chip, _, hbm, links = INSTANCES[name]
    if lnc == 1 and name == "trn2.48xlarge":
        per_chip = 8
    chip_gb = hbm * INSTANCES[name][1] // GIB
    rows = []
    for chip in range(chips):
        first, last = chip * per_chip, chip * per_chip + per_chip - 1
        rows.append([str(chip), str(per_chip), f"{first}-{last}", f"{chip_gb} GB",
                     ", ".join(str(n) for n in _neighbours(links, chip, chips))])
    return rows


@pytest.mark.parametrize("name, args, lnc", [
    ("trn1.2xlarge", [], None),
    ("trn1.32xlarge", ["--instance-type", "trn1.32xlarge"], None),
    ("trn2.48xlarge", ["--instance-type", "trn2.48xlarge"], None),
    ("trn2.48xlarge", ["--instance-type", "trn2.48xlarge", "--logical-nc-config", "1"], 1),
    ("inf2.48xlarge", ["--instance-type", "inf2.48xlarge"], None),
])
def test_ls_table(lock_dir, name, args, lnc):
    proc = run_ls(lock_dir, *args)
    assert proc.returncode == 0, proc.stderr
    header, columns, rows = _parse_table(proc.stdout)
    engines = [line for line in header if line.startswith("simulator engine for ")]
    assert [line.split(":")[0] for line in engines] == [f"simulator engine for {f}" for f in ("jax", "torch-xla", "capi")]
    for line, framework in zip(engines, ("jax", "torch-xla", "capi")):
        assert f": {config.engine_build_for(framework)} (" in line, engines  # PJRT_NEURON_SIM_ENGINE, or auto's
    header = [line for line in header if line not in engines]
    assert header == ["engine: sim (simulated NeuronCores)", f"instance-type: {name} (simulated)",
                      f"logical-neuroncore-config: {lnc or DEFAULT_LNC.get(name, 1)}",
                      f"neuroncore-generation: {INSTANCES[name][2]}"]
    assert columns == ["NEURON DEVICE", "NEURON CORES", "NEURON CORE IDS", "NEURON MEMORY", "CONNECTED DEVICES"]
    assert rows == _expected_rows(name, lnc)


def test_ls_trn1_32xlarge_torus_neighbours(lock_dir):
    proc = run_ls(lock_dir, "--instance-type", "trn1.32xlarge")
    _, _, rows = _parse_table(proc.stdout)
    assert len(rows) == 16
    assert rows[0] == ["0", "2", "0-1", "32 GB", "1, 3, 4, 12"]
    assert rows[5][4] == "1, 4, 6, 9"
    assert rows[15] == ["15", "2", "30-31", "32 GB", "3, 11, 12, 14"]


def test_ls_takes_the_instance_from_the_environment(lock_dir):
    proc = run_ls(lock_dir, PJRT_NEURON_INSTANCE_TYPE="inf2.24xlarge")
    assert proc.returncode == 0, proc.stderr
    header, _, rows = _parse_table(proc.stdout)
    assert header[:2] == ["engine: sim (simulated NeuronCores)", "instance-type: inf2.24xlarge (simulated)"]
    assert rows == _expected_rows("inf2.24xlarge")
    assert rows[0][4] == "1, 5"


@pytest.mark.parametrize("name", ["trn1.32xlarge", "trn2.48xlarge"])
def test_ls_json_has_the_same_data(lock_dir, name):
    text = run_ls(lock_dir, "--instance-type", name)
    proc = run_ls(lock_dir, "--json", "--instance-type", name)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    chips, per_chip, kind, hbm, links = INSTANCES[name]
    assert {k: data[k] for k in ("instance_type", "logical_nc_config", "core_generation", "total_cores",
                                 "hbm_bytes_per_core", "chip_links", "lock_directory")} == {
        "instance_type": name, "logical_nc_config": DEFAULT_LNC.get(name, 1), "core_generation": kind,
        "total_cores": chips * per_chip, "hbm_bytes_per_core": hbm, "chip_links": links,
        "lock_directory": f"{lock_dir}/{name}"}
    _, _, rows = _parse_table(text.stdout)
    assert len(data["chips"]) == len(rows) == chips
    for chip, row in zip(data["chips"], rows):
        assert chip["core_ids"] == list(range(chip["chip"] * per_chip, (chip["chip"] + 1) * per_chip))
        assert chip["coordinates"] == _coords(links, chip["chip"])
        assert chip["holders"] == []
        assert row == [str(chip["chip"]), str(chip["cores"]), f"{chip['core_ids'][0]}-{chip['core_ids'][-1]}",
                       f"{chip['memory_bytes'] >> 30} GB", ", ".join(map(str, chip["connected_chips"]))]
        assert chip["memory_bytes"] == hbm * per_chip


def test_ls_wide_shows_the_processes_holding_cores(lock_dir):
    with Holder(lock_dir, {"instance_type": "trn1.32xlarge", "visible_cores": "2-3"}) as holder:
        comm = Path(f"/proc/{holder.pid}/comm").read_text().strip()
        proc = run_ls(lock_dir, "-w", "--instance-type", "trn1.32xlarge")
        assert proc.returncode == 0, proc.stderr
        _, columns, rows = _parse_table(proc.stdout)
        assert columns[-1] == "PROCESSES"
        assert rows[1][-1] == f"core 2: pid {holder.pid} ({comm}), core 3: pid {holder.pid} ({comm})"
        assert [row[-1] for i, row in enumerate(rows) if i != 1] == [""] * 15
        data = json.loads(run_ls(lock_dir, "--json", "--instance-type", "trn1.32xlarge").stdout)
        assert data["chips"][1]["holders"] == [{"core": 2, "pid": holder.pid}, {"core": 3, "pid": holder.pid}]
        assert all(chip["holders"] == [] for chip in data["chips"] if chip["chip"] != 1)
        # Without -w, no process column.
        _, columns, _ = _parse_table(run_ls(lock_dir, "--instance-type", "trn1.32xlarge").stdout)
        assert "PROCESSES" not in columns
        holder.release()
        _, _, rows = _parse_table(run_ls(lock_dir, "-w", "--instance-type", "trn1.32xlarge").stdout)
        assert [row[-1] for row in rows] == [""] * 16


@pytest.mark.parametrize("args, env, message", [
    (["--instance-type", "trn9.mega"], {},
     "pjrt-neuron: unknown instance type 'trn9.mega' (PJRT_NEURON_INSTANCE_TYPE or create option instance_type); "
     "known: " + ", ".join(KNOWN_INSTANCES)),
    ([], {"PJRT_NEURON_INSTANCE_TYPE": "trn9.mega"},
     "pjrt-neuron: PJRT_NEURON_INSTANCE_TYPE='trn9.mega' is not a known instance type; use one of "
     + ", ".join(KNOWN_INSTANCES)),
    (["--logical-nc-config", "2"], {},
     "pjrt-neuron: NEURON_LOGICAL_NC_CONFIG=2 is not valid on trn1.2xlarge (NeuronCore-v2); allowed: 1"),
])
def test_ls_errors_exit_2_with_the_message(lock_dir, args, env, message):
    proc = run_ls(lock_dir, *args, **env)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1] == message
