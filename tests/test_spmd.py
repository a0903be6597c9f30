"""One process, many NeuronCores: SPMD programs over several simulated cores, against the CPU backend.

What is covered (the checks themselves are in spmd_scripts/jax_checks.py):

- JAX on the 2 NeuronCores of trn1.2xlarge, in this process, and on the 32 of trn1.32xlarge and
  on cores 6-7 of trn1.32xlarge (NEURON_RT_VISIBLE_CORES, so device ids are not engine core
  numbers) in subprocesses; each under both partitioners (GSPMD and Shardy): jit with
  NamedSharding (data- and model-parallel matmuls, output shardings), shard_map collectives
  (psum, all_gather, ppermute, all_to_all, psum_scatter) over the whole mesh and over one axis
  of a 2-d mesh (replica groups that are rows or columns of the mesh), pmap with psum, a sharded training
  step with donated parameters, device_put with shardings, unreduced axes of explicit
  sharding (Shardy only: resolved directly, after sums, slices, concatenations and adds,
  resharded to and from unreduced, returned as partial sums, under grad), and the device order of compiled
  executables (also after serialize/deserialize). Every result is compared with the same
  check run by JAX's CPU backend with as many forced host devices (a subprocess): values,
  where each shard lives, and the shardings must agree.
- The device assignment a multi-partition executable reports through the C API
  (PJRT_LoadedExecutable_GetDeviceAssignment), which jaxlib does not expose to Python.
- Per-core HBM accounting of sharded arrays.
- torch-xla SPMD on NEURON (2 and 32 cores): xs.mark_sharding of inputs and weights, SGD
  steps whose losses and weights match the unsharded run on PJRT_DEVICE=CPU.

Subprocesses start together up front on a small pool (the machine may have only two CPUs).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import job_pool
import pjrt_capi
from job_pool import Job, JobPool, uses, wanted_jobs

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "tests" / "spmd_scripts"
sys.path.insert(0, str(SCRIPTS))

import jax_checks as J  # noqa: E402

TIMEOUT = 300
TORCH_TOL = 1e-5

# Settings that would change what a subprocess does if inherited from the caller.
_SCRUBBED = (
    "PJRT_DEVICE", "CPU_NUM_DEVICES", "XLA_REGISTER_INSTALLED_PLUGINS", "NEURON_LIBRARY_PATH",
    "PJRT_NEURON_TORCH_PLUGIN", "PJRT_NEURON_INSTANCE_TYPE", "NEURON_RT_VISIBLE_CORES",
    "NEURON_RT_NUM_CORES", "NEURON_LOGICAL_NC_CONFIG", "JAX_PLATFORMS", "PJRT_DYNAMIC_PLUGINS",
    "XLA_USE_SPMD", "XLA_USE_32BIT_LONG", "XLA_USE_BF16", "XLA_DOWNCAST_BF16", "XLA_FLAGS",
    "JAX_USE_SHARDY_PARTITIONER",
)


# ---------------------------------------------------------------- subprocesses


def _env(**settings) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PJRT_NEURON_LOCK_DIR"] = tempfile.mkdtemp(prefix="pjrt-neuron-spmd-locks-")  # an instance each
    env.update(settings)
    return env


def _cpu_devices(n: int) -> dict:
    return {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": f"--xla_force_host_platform_device_count={n}"}


def _jobs() -> dict:
    jax_script = [sys.executable, str(SCRIPTS / "jax_spmd.py")]
    torch_script = [sys.executable, str(SCRIPTS / "torch_spmd.py")]
    return {  # the reference the in-process tests wait for first, then longest first
        "jax_cpu_2": Job(jax_script, _env(**_cpu_devices(2))),
        "torch_spmd_32": Job([*torch_script, "spmd"],
                             _env(PJRT_DEVICE="NEURON", PJRT_NEURON_INSTANCE_TYPE="trn1.32xlarge")),
        "torch_spmd_2": Job([*torch_script, "spmd"], _env(PJRT_DEVICE="NEURON")),
        "torch_cpu_reference": Job([*torch_script, "reference"], _env(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1")),
        "jax_neuron_32": Job(jax_script, _env(JAX_PLATFORMS="neuron,cpu", PJRT_NEURON_INSTANCE_TYPE="trn1.32xlarge")),
        "jax_cpu_32": Job(jax_script, _env(**_cpu_devices(32))),
        "jax_neuron_cores_6_7": Job(jax_script, _env(JAX_PLATFORMS="neuron,cpu", PJRT_NEURON_INSTANCE_TYPE="trn1.32xlarge",
                                                     NEURON_RT_VISIBLE_CORES="6-7")),
    }


class Runner(JobPool):
    report = JobPool.json  # the name the tests read the cached JSON by


@pytest.fixture(scope="module")
def results(request):
    with Runner(_jobs(), wanted_jobs(request), workers=3,
                run=functools.partial(job_pool.run, cwd=REPO, timeout=TIMEOUT)) as pool:
        yield pool


@pytest.fixture(scope="module")
def neuron():
    devices = jax.devices("neuron")
    assert len(devices) == 2
    return devices


# ---------------------------------------------------------------- comparing outcomes


def _check_from(report: dict, partitioner: str, check: str, source: str) -> J.Outcome:
    entry = report["partitioners"][partitioner]["checks"][check]
    if "error" in entry:
        pytest.fail(f"{check} under {partitioner} failed in {source}: {entry['error']}\n{entry['traceback']}")
    return J.outcome_from_json(entry["ok"])


def assert_facts(check: str, o: J.Outcome, n: int):
    """What must hold on any backend, independently of the CPU reference."""
    m = o.meta
    everywhere = list(range(n))
    sharded_outputs = {
        "dp_matmul": ["out"], "mp_matmul": ["columns"],
        "collectives": ["ppermute", "all_to_all", "psum_scatter", "axis_index"],
        "group_collectives": ["ppermute_model", "ppermute_data", "all_to_all_model", "psum_scatter_model"],
        "device_put": ["put", "resharded"], "compiled_executable": ["natural_doubled", "reversed_doubled"],
    }.get(check, [])
    for name in sharded_outputs:
        positions = [p for p, _ in o.placement[name]]
        assert positions == everywhere, (name, o.placement[name])  # one shard on every device
    if check == "dp_matmul":
        assert m["out_is_batch_sharded"] and m["shards_hold_their_slices"], m
    elif check == "mp_matmul":
        assert m["columns_is_2d_sharded"] and m["contracting_is_replicated"] and m["shards_hold_their_slices"], m
        assert [p for p, _ in o.placement["contracting"]] == everywhere
    elif check == "collectives":
        assert m["shards_hold_their_slices"], m
        assert [p for p, _ in o.placement["psum"]] == everywhere  # replicated result on every device
    elif check == "group_collectives":
        assert m["shards_hold_their_slices"], m
    elif check == "pmap":
        assert [p for p, _ in o.placement["psum"]] == everywhere
    elif check == "train_step":
        assert m["params_replicated"] and m["params_on_mesh"] and m["donated_params_consumed"], m
        assert m["loss_fell"], o.values["losses"]
    elif check == "device_put":
        assert m["shards_hold_their_slices"] and m["put_devices"] == everywhere, m
        assert m["sharding_devices_in_mesh_order"] == everywhere, m
    elif check == "compiled_executable":
        for tag in ("natural", "reversed"):
            # The executable runs on the mesh's devices in the mesh's order, before and after a
            # serialize/deserialize round trip.
            assert m[f"{tag}_local_devices"] == m[f"{tag}_mesh_order"], (tag, m)
            assert m[f"{tag}_deserialized_local_devices"] == m[f"{tag}_mesh_order"], (tag, m)
            assert m[f"{tag}_output_shardings_match"] == [True, True], (tag, m)
            assert m[f"{tag}_num_partitions"] == n, (tag, m)
        assert m["reversed_mesh_order"] == everywhere[::-1]


def assert_outcome(check: str, got: J.Outcome, ref: J.Outcome, n: int):
    """`got` (NeuronCores) against its numpy/unsharded expectation and against `ref` (CPU backend)."""
    assert sorted(got.values) == sorted(ref.values)
    for name, value in got.values.items():
        want, cpu = got.expected[name], ref.values[name]
        assert value.dtype == cpu.dtype and value.shape == cpu.shape, (name, value.dtype, value.shape, cpu.dtype, cpu.shape)
        if got.rtol == 0.0:
            np.testing.assert_array_equal(value, want, err_msg=f"{check}/{name} vs numpy")
            np.testing.assert_array_equal(value, cpu, err_msg=f"{check}/{name} vs the CPU backend")
        else:
            # Transcendentals (tanh, exp, log) of the engine's XLA and jaxlib's may differ by an ulp.
            np.testing.assert_allclose(value, want, rtol=got.rtol, atol=1e-7, err_msg=f"{check}/{name} vs unsharded")
            np.testing.assert_allclose(value, cpu, rtol=got.rtol, atol=1e-7, err_msg=f"{check}/{name} vs the CPU backend")
    # Each shard on the same device position, holding the same slice, as on the CPU backend.
    assert got.placement == ref.placement
    assert got.meta == ref.meta
    assert_facts(check, got, n)


CHECKS = list(J.CHECKS)
PARTITIONERS = list(J.PARTITIONERS)


# ---------------------------------------------------------------- JAX, 2 NeuronCores, this process


@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_partitioner_switch_takes_effect(neuron, partitioner):
    with J.partitioner(partitioner):
        assert J.lowered_partitioner(neuron) == partitioner


@uses("jax_cpu_2")
@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_jax_2_cores(results, neuron, partitioner, check):
    with J.partitioner(partitioner):
        got = J.CHECKS[check](neuron)
    report = results.report("jax_cpu_2")
    assert report["platform"] == "cpu" and len(report["device_ids"]) == 2
    assert_outcome(check, got, _check_from(report, partitioner, check, "the CPU reference"), 2)


def test_sharded_array_charges_each_core_its_shard(neuron):
    mesh = J.mesh_1d(neuron)
    before = [d.memory_stats()["bytes_in_use"] for d in neuron]
    x = jax.device_put(np.zeros((512, 1024), np.float32), NamedSharding(mesh, P("x")))  # 2 MiB, 1 MiB a core
    x.block_until_ready()
    during = [d.memory_stats()["bytes_in_use"] for d in neuron]
    for b, d in zip(before, during):
        assert 1 << 20 <= d - b < (1 << 20) + 4096, (before, during)
    r = jax.device_put(np.zeros((256, 1024), np.float32), NamedSharding(mesh, P()))  # 1 MiB on every core
    r.block_until_ready()
    replicated = [d.memory_stats()["bytes_in_use"] for d in neuron]
    for d, r_ in zip(during, replicated):
        assert 1 << 20 <= r_ - d < (1 << 20) + 4096, (during, replicated)
    x.delete()
    r.delete()
    assert [d.memory_stats()["bytes_in_use"] for d in neuron] == before


# ---------------------------------------------------------------- JAX, 32 NeuronCores / cores 6-7, subprocesses


@uses("jax_neuron_32", "jax_cpu_32")
@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_jax_32_cores(results, partitioner, check):
    report = results.report("jax_neuron_32")
    assert report["platform"] == "neuron" and report["device_ids"] == list(range(32))
    assert report["partitioners"][partitioner]["lowered_partitioner"] == partitioner
    got = _check_from(report, partitioner, check, "the trn1.32xlarge run")
    ref = _check_from(results.report("jax_cpu_32"), partitioner, check, "the CPU reference")
    assert_outcome(check, got, ref, 32)


@uses("jax_neuron_cores_6_7", "jax_cpu_2")
@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_jax_on_visible_cores_6_7(results, partitioner, check):
    """Device ids 6 and 7 are engine cores 0 and 1: every program's device ids are translated."""
    report = results.report("jax_neuron_cores_6_7")
    assert report["platform"] == "neuron" and report["device_ids"] == [6, 7]
    assert report["partitioners"][partitioner]["lowered_partitioner"] == partitioner
    got = _check_from(report, partitioner, check, "the cores 6-7 run")
    ref = _check_from(results.report("jax_cpu_2"), partitioner, check, "the CPU reference")
    assert_outcome(check, got, ref, 2)


# ---------------------------------------------------------------- device assignment through the C API


def _pb_fields(data: bytes):
    def varint(i):
        shift = value = 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, i
    i = 0
    while i < len(data):
        key, i = varint(i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(i)
        elif wire == 2:
            size, i = varint(i)
            value, i = data[i:i + size], i + size
        else:
            raise AssertionError(f"unexpected wire type {wire} in a DeviceAssignmentProto")
        yield number, wire, value


def _decode_device_assignment(data: bytes) -> dict:
    """xla.DeviceAssignmentProto: replica_count = 1, computation_count = 2,
    computation_devices = 3 (ComputationDevice: repeated int64 replica_device_ids = 1)."""
    out = {"replica_count": 0, "computation_count": 0, "computation_devices": []}
    for number, wire, value in _pb_fields(data):
        if number == 1:
            out["replica_count"] = value
        elif number == 2:
            out["computation_count"] = value
        elif number == 3:
            ids = []
            for n2, w2, v2 in _pb_fields(value):
                if n2 != 1:
                    continue
                if w2 == 0:
                    ids.append(v2)
                else:  # packed
                    ids.extend(_packed_varints(v2))
            out["computation_devices"].append(ids)
    return out


def _packed_varints(data: bytes) -> list:
    values, i = [], 0
    while i < len(data):
        shift = value = 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        values.append(value)
    return values


def _spmd_compile_options(device_ids: list) -> bytes:
    """CompileOptionsProto for 1 replica x len(device_ids) SPMD partitions on `device_ids`."""
    pb = pjrt_capi
    assignment = pb._pb_varint(1, 1) + pb._pb_varint(2, len(device_ids))
    for device_id in device_ids:
        assignment += pb._pb_bytes(3, pb._pb_bytes(1, pb._varint(device_id)))
    build = (pb._pb_varint(4, 1) + pb._pb_varint(5, len(device_ids)) + pb._pb_varint(6, 1)
             + pb._pb_bytes(9, assignment))
    return pb._pb_bytes(3, build)


def _device_assignment(api, loaded) -> dict:
    a = api.call("PJRT_LoadedExecutable_GetDeviceAssignment", executable=loaded.ptr)
    data = ctypes.string_at(a.serialized_bytes, a.serialized_bytes_size)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(a.serialized_device_assignment_deleter)(a.serialized_device_assignment)
    return _decode_device_assignment(data)


@pytest.fixture(scope="module")
def two_partition_program(neuron):
    """StableHLO of (a * 2 sharded over 2 partitions, a.sum(0) replicated), as JAX lowers it with GSPMD."""
    mesh = J.mesh_1d(neuron)
    with J.partitioner("gspmd"):
        f = jax.jit(lambda a: (a * 2.0, a.sum(0)), in_shardings=NamedSharding(mesh, P("x")),
                    out_shardings=(NamedSharding(mesh, P("x")), NamedSharding(mesh, P())))
        text = f.lower(jax.ShapeDtypeStruct((4, 3), np.float32)).as_text()
    assert "mhlo.num_partitions = 2" in text
    return text


@pytest.mark.parametrize("options, assignment", [
    ({}, [0, 1]),
    ({}, [1, 0]),
    ({"instance_type": "trn1.32xlarge", "visible_cores": "6-7"}, [6, 7]),
    ({"instance_type": "trn1.32xlarge", "visible_cores": "6-7"}, [7, 6]),
], ids=["trn1.2xlarge-0,1", "trn1.2xlarge-1,0", "cores6-7-6,7", "cores6-7-7,6"])
def test_capi_device_assignment_of_spmd_executable(plugin_api, two_partition_program, options, assignment):
    with pjrt_capi.Client(plugin_api, options) as client:
        executable = client.compile(two_partition_program, "mlir", _spmd_compile_options(assignment))
        assert [d.id for d in executable.addressable_devices] == assignment
        assert _device_assignment(plugin_api, executable) == {
            "replica_count": 1, "computation_count": 2, "computation_devices": [[i] for i in assignment]}
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        args = [[client.buffer_from_numpy(x[2 * k:2 * k + 2], client.lookup_device(d))] for k, d in enumerate(assignment)]
        outputs = executable.execute(args)
        for k, (row, device_id) in enumerate(zip(outputs, assignment)):
            assert [b.device.id for b in row] == [device_id, device_id]
            np.testing.assert_array_equal(row[0].to_numpy(), x[2 * k:2 * k + 2] * 2.0)
            np.testing.assert_array_equal(row[1].to_numpy(), x.sum(0))  # the all-reduce saw both shards


# ---------------------------------------------------------------- torch-xla SPMD


TORCH_RUNS = ["data_parallel", "model_parallel", "weight_sharded"]
TORCH_SHARD_SHAPES = {  # fc1.weight is (64, 32)
    2: {"model_parallel": [[32, 32]], "weight_sharded": [[64, 16]]},
    32: {"model_parallel": [[32, 32]], "weight_sharded": [[64, 1]]},
}


@uses("torch_spmd_2", "torch_spmd_32", "torch_cpu_reference")
@pytest.mark.parametrize("run", TORCH_RUNS)
@pytest.mark.parametrize("cores", [2, 32])
def test_torch_xla_spmd_training_matches_cpu(results, cores, run):
    reference = results.report("torch_cpu_reference")
    assert reference["device_type"] == "CPU" and reference["is_spmd"] is False
    ref = reference["runs"]["reference"]
    out = results.report(f"torch_spmd_{cores}")
    assert (out["device_type"], out["device_count"], out["addressable_device_count"], out["is_spmd"]) == (
        "NEURON", cores, cores, True)
    got = out["runs"][run]
    assert len(got["losses"]) == len(ref["losses"]) == 4
    assert got["losses"] == pytest.approx(ref["losses"], abs=TORCH_TOL, rel=0), (got["losses"], ref["losses"])
    for w in ("fc1_weight", "fc2_weight"):
        np.testing.assert_allclose(got[w], ref[w], rtol=0, atol=TORCH_TOL, err_msg=w)
    assert got["losses"][-1] < got["losses"][0] - 0.05, got["losses"]  # it trained


@uses("torch_spmd_2", "torch_spmd_32")
@pytest.mark.parametrize("run", TORCH_RUNS)
@pytest.mark.parametrize("cores", [2, 32])
def test_torch_xla_spmd_shardings_survive_training(results, cores, run):
    got = results.report(f"torch_spmd_{cores}")["runs"][run]
    specs = got["specs"]
    all_devices = ",".join(str(i) for i in range(cores))
    if run == "data_parallel":
        assert specs == {"fc1_weight": "{replicated}", "fc2_weight": "{replicated}"}
        return
    assert sorted(got["shard_devices"]) == sorted(f"NEURON:{i}" for i in range(cores))
    assert got["shard_shapes"] == TORCH_SHARD_SHAPES[cores][run]
    if run == "weight_sharded":
        assert specs == {"fc1_weight": f"{{devices=[1,{cores}]{all_devices}}}", "fc2_weight": "{replicated}"}
    elif cores == 2:
        assert specs == {"fc1_weight": "{devices=[2,1]0,1}", "fc2_weight": "{devices=[1,2]0,1}"}
    else:
        assert specs["fc1_weight"].startswith("{devices=[2,1,16]") and "last_tile_dim_replicate" in specs["fc1_weight"]
        assert specs["fc2_weight"].startswith("{devices=[1,2,16]") and "last_tile_dim_replicate" in specs["fc2_weight"]
