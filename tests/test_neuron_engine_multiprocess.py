"""Multi-process jobs on the Trainium engine (PJRT_NEURON_ENGINE=neuron), on the Neuron stand-in.

Each process drives its own NeuronCores through its own Neuron runtime session (no instance
daemon); programs whose ranks span processes load with nrt_load_collectives, ranks numbered by
the device assignment, and meet in the runtime's communicator at NEURON_RT_ROOT_COMM_ID (the
stand-in's communicator crosses processes like the real one's).

- torch-xla DDP under torchrun: the same losses and weights as the same job on simulated cores;
  under xmp.spawn, the same as under torchrun.
- Two jax.distributed processes: the CPU backend's numbers (collectives and a sharded training
  step); the root address is agreed through JAX's key-value store. Three processes on two
  simulated hosts (each its own stand-in cores): devices in process order, the same numbers.
- A rank that dies: its peer's collective fails with DEADLINE_EXCEEDED from the runtime.
- In this process, one process's client of a two-process job: devices, ownership, errors.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import job_pool
import pjrt_capi as P
import programs
from job_pool import Job, JobPool, uses, wanted_jobs
from test_multiprocess import _free_port, _pair, _pair_results
from test_neuron_engine import neuron, pjrt_error, standin_env  # noqa: F401 - neuron is a fixture

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "tests" / "multiprocess_scripts"
DDP_EXAMPLE = REPO / "examples" / "train_digits_ddp.py"
JAX_SCRIPT = SCRIPTS / "jax_two_process.py"
LAUNCH = SCRIPTS / "launch.py"
TIMEOUT = 600
EPOCHS = "12"

_SCRUBBED = (
    "PJRT_DEVICE", "CPU_NUM_DEVICES", "XLA_REGISTER_INSTALLED_PLUGINS", "NEURON_LIBRARY_PATH",
    "PJRT_NEURON_TORCH_PLUGIN", "PJRT_NEURON_INSTANCE_TYPE", "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES",
    "NEURON_LOGICAL_NC_CONFIG", "JAX_PLATFORMS", "XLA_USE_SPMD", "XLA_FLAGS", "NEURONCORE_NUM_DEVICES",
    "NEURON_PJRT_PROCESS_INDEX", "NEURON_PJRT_WORLD_SIZE", "NEURON_PJRT_PROCESSES_NUM_DEVICES",
    "PJRT_NEURON_COLLECTIVE_TIMEOUT", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "NEURON_RT_ROOT_COMM_ID", "NEURON_RT_EXEC_TIMEOUT",
    "PJRT_NEURON_ENGINE",
)


def _env(standin, neuron: bool, **settings) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PJRT_NEURON_LOCK_DIR"] = tempfile.mkdtemp(prefix="pjrt-neuron-nmp-locks-")
    env["MASTER_ADDR"] = "127.0.0.1"
    env["MASTER_PORT"] = _free_port()
    env["PJRT_NEURON_COLLECTIVE_TIMEOUT"] = "120"
    env["PJRT_NEURON_COMPILE_CACHE"] = "0"  # every run compiles: nothing is shared with other tests
    if neuron:
        env.update(standin_env(standin, tempfile.mkdtemp(prefix="nrt-locks-"), NEURON_RT_EXEC_TIMEOUT=120))
    env.update({k: str(v) for k, v in settings.items()})
    return env


def _two_hosts(standin) -> dict:
    """Three processes on two simulated trn1.2xlarge hosts: cores 0 and 1 of one, core 0 of the other.
    A host is a stand-in lock directory (its cores) and a plugin lock directory of its own."""
    hosts = [(tempfile.mkdtemp(prefix="nrt-host-"), tempfile.mkdtemp(prefix="pjrt-neuron-host-")) for _ in range(2)]
    placement = [(0, "0"), (0, "1"), (1, "0")]
    per_process = [{"NEURON_STANDIN_LOCK_DIR": hosts[h][0], "PJRT_NEURON_LOCK_DIR": hosts[h][1],
                    "NEURON_RT_VISIBLE_CORES": core} for h, core in placement]
    return _env(standin, True, JAX_PLATFORMS="neuron", LAUNCH_PER_PROCESS_ENV=json.dumps(per_process))


def _jobs(standin) -> dict:
    ddp = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", str(DDP_EXAMPLE),
           "--epochs", EPOCHS]
    jax_pair = [sys.executable, str(LAUNCH), "2", str(JAX_SCRIPT)]
    return {  # longest first
        # torch-xla would choose MASTER_ADDR:62182; a port of the job's own keeps runs apart.
        "ddp_neuron": Job([*ddp[:4], f"--master_port={_free_port()}", *ddp[4:]],
                          _env(standin, True, PJRT_DEVICE="NEURON",
                               NEURON_RT_ROOT_COMM_ID=f"127.0.0.1:{_free_port()}")),
        "ddp_spawn_neuron": Job([sys.executable, str(DDP_EXAMPLE), "--epochs", EPOCHS, "--spawn"],
                                _env(standin, True, PJRT_DEVICE="NEURON", NEURONCORE_NUM_DEVICES=2,
                                     NEURON_RT_ROOT_COMM_ID=f"127.0.0.1:{_free_port()}")),
        "ddp_sim": Job([*ddp[:4], f"--master_port={_free_port()}", *ddp[4:]],
                       _env(standin, False, PJRT_DEVICE="NEURON")),
        "jax_neuron": Job(jax_pair, _env(standin, True, JAX_PLATFORMS="neuron")),
        "jax_cpu": Job(jax_pair, _env(standin, False, JAX_PLATFORMS="cpu")),
        "jax_two_hosts": Job([sys.executable, str(LAUNCH), "3", str(JAX_SCRIPT)], _two_hosts(standin)),
        "jax_cpu_three": Job([sys.executable, str(LAUNCH), "3", str(JAX_SCRIPT)], _env(standin, False, JAX_PLATFORMS="cpu")),
        "jax_die": Job([*jax_pair, "--check", "psum", "--die-after-init"],
                       _env(standin, True, JAX_PLATFORMS="neuron", NEURON_RT_EXEC_TIMEOUT=5)),
    }


@pytest.fixture(scope="module")
def results(request, standin):
    with JobPool(_jobs(standin), wanted_jobs(request), workers=2,
                 run=functools.partial(job_pool.run, cwd=REPO, timeout=TIMEOUT)) as pool:
        yield pool


# ---------------------------------------------------------------- torch-xla DDP under torchrun


@uses("ddp_neuron", "ddp_sim")
def test_torchrun_ddp_on_the_neuron_runtime_trains_like_simulated_cores(results):
    neuron, sim = results.json("ddp_neuron"), results.json("ddp_sim")
    assert neuron["world_size"] == sim["world_size"] == 2
    assert len(set(neuron["weight_sha256_per_rank"])) == 1  # the ranks' all-reduces met
    np.testing.assert_allclose(neuron["losses"], sim["losses"], rtol=1e-4)
    np.testing.assert_allclose(neuron["weight_sum_per_rank"], sim["weight_sum_per_rank"], rtol=1e-4)
    assert neuron["losses"][-1] < neuron["losses"][0] / 2


@uses("ddp_neuron", "ddp_spawn_neuron")
def test_xmp_spawn_on_the_neuron_runtime_trains_like_torchrun(results):
    torchrun, spawn = results.json("ddp_neuron"), results.json("ddp_spawn_neuron")
    assert spawn["world_size"] == 2 and len(set(spawn["weight_sha256_per_rank"])) == 1
    assert spawn["losses"] == torchrun["losses"]
    assert spawn["weight_sha256_per_rank"] == torchrun["weight_sha256_per_rank"]


# ---------------------------------------------------------------- JAX: two jax.distributed processes


@uses("jax_neuron")
def test_jax_processes_on_the_neuron_runtime_see_the_job_and_their_own_core(results):
    for index, r in enumerate(_pair_results(results, "jax_neuron")):
        assert r["platform"] == "neuron"
        assert (r["process"], r["process_count"]) == (index, 2)
        assert (r["device_count"], r["local_device_count"]) == (2, 1)
        assert r["device_ids"] == [0, 1] and r["device_process_indices"] == [0, 1]
        assert r["problems"] == []


@uses("jax_neuron", "jax_cpu")
@pytest.mark.parametrize("check", ["psum", "all_gather", "ppermute", "global_array"])
def test_jax_collectives_across_processes_on_the_neuron_runtime_equal_the_cpu_backend(results, check):
    neuron = _pair_results(results, "jax_neuron")
    cpu = _pair_results(results, "jax_cpu")
    for n, c in zip(neuron, cpu):
        assert n[check] == c[check]


@uses("jax_neuron", "jax_cpu")
def test_jax_sharded_training_across_processes_on_the_neuron_runtime_equals_the_cpu_backend(results):
    neuron = _pair_results(results, "jax_neuron")
    cpu = _pair_results(results, "jax_cpu")
    for n, c in zip(neuron, cpu):
        np.testing.assert_allclose(n["losses"], c["losses"], rtol=1e-5)
        np.testing.assert_allclose(n["final_params"]["w"], c["final_params"]["w"], rtol=1e-5, atol=1e-6)


@uses("jax_two_hosts", "jax_cpu_three")
def test_a_jax_job_across_two_hosts_numbers_devices_in_process_order_and_equals_the_cpu_backend(results):
    neuron = _pair_results(results, "jax_two_hosts")
    cpu = _pair_results(results, "jax_cpu_three")
    for index, (n, c) in enumerate(zip(neuron, cpu)):
        assert n["device_ids"] == [0, 1, 2] and n["device_process_indices"] == [0, 1, 2]
        assert n["problems"] == []
        for check in ("psum", "all_gather", "ppermute", "global_array", "losses"):
            assert n[check] == c[check], (index, check)


@uses("jax_die")
def test_a_rank_that_dies_fails_its_peers_collective_through_the_runtime(results):
    first, second = _pair(results, "jax_die")
    assert second["returncode"] == 3
    assert first["returncode"] != 0, first["stdout"]
    error = (first["result"] or {}).get("error", "")
    assert error.startswith("DEADLINE_EXCEEDED: PJRT_LoadedExecutable_Execute"), (first["stdout"], first["stderr"])
    assert "nrt_execute" in error and "NRT_TIMEOUT" in error, error


# ---------------------------------------------------------------- one process's client, in this process


def _c_getenv(name: str):
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    value = libc.getenv(name.encode())
    return value.decode() if value is not None else None


def _unsetenv(name: str) -> None:
    """Also what the engine set with setenv(3), which os.environ never saw."""
    os.environ.pop(name, None)
    ctypes.CDLL(None).unsetenv(name.encode())


@pytest.fixture
def job_process(neuron, tmp_path):
    """make(index, **settings) -> process `index`'s client of a two-process job, one core each."""

    def make(index, **settings):
        for name in ("NEURON_RT_ROOT_COMM_ID", "NEURON_RT_VISIBLE_CORES", "MASTER_ADDR"):
            _unsetenv(name)
        if "NEURON_PJRT_PROCESSES_NUM_DEVICES" not in settings:
            settings["NEURON_PJRT_WORLD_SIZE"] = 2
        return neuron(NEURON_PJRT_PROCESS_INDEX=index, PJRT_NEURON_LOCK_DIR=tmp_path / "locks", **settings)

    yield make
    for name in ("NEURON_RT_ROOT_COMM_ID", "NEURON_RT_VISIBLE_CORES"):
        _unsetenv(name)


def test_a_process_of_a_job_drives_only_its_own_core(job_process):
    client = job_process(1, NEURON_RT_ROOT_COMM_ID=f"127.0.0.1:{_free_port()}")
    assert [d.id for d in client.devices()] == [0, 1]
    (mine,) = client.addressable_devices()
    assert mine.id == 1
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = client.compile(programs.DOUBLE).execute([client.buffer_from_numpy(a, device=mine)])
    np.testing.assert_array_equal(out[0].to_numpy(), a + a)
    # The runtime sees this process's core only: NEURON_RT_VISIBLE_CORES was set to it.
    assert _c_getenv("NEURON_RT_VISIBLE_CORES") == "1-1"


def test_a_job_with_no_root_address_is_refused_with_what_to_set(job_process):
    error = pjrt_error(lambda: job_process(0))
    assert error.code == P.ErrorCode.FAILED_PRECONDITION, error
    assert "NEURON_RT_ROOT_COMM_ID" in error.message and "MASTER_ADDR" in error.message


def test_a_job_takes_the_root_address_from_master_addr(job_process):
    client = job_process(0, MASTER_ADDR="127.0.0.1")
    assert len(client.addressable_devices()) == 1
    assert _c_getenv("NEURON_RT_ROOT_COMM_ID") == "127.0.0.1:62182"


def test_a_process_on_a_second_host_numbers_its_cores_after_the_first_hosts(job_process):
    """Process 1 of a job of two trn1.2xlarge hosts, two cores each: its cores 0-1 are the job's 2-3."""
    client = job_process(1, NEURON_PJRT_PROCESSES_NUM_DEVICES="2,2", NEURON_RT_VISIBLE_CORES="0-1",
                         NEURON_RT_ROOT_COMM_ID=f"127.0.0.1:{_free_port()}")
    assert [d.id for d in client.devices()] == [0, 1, 2, 3]
    assert [d.id for d in client.addressable_devices()] == [2, 3]
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    first, second = client.addressable_devices()
    (out,) = client.compile(programs.DOUBLE).execute([client.buffer_from_numpy(a, device=first)])
    np.testing.assert_array_equal(out[0].to_numpy(), a + a)
    np.testing.assert_array_equal(out[0].copy_to_device(second).to_numpy(), a + a)


def test_a_process_holding_other_than_its_share_is_refused(job_process):
    error = pjrt_error(lambda: job_process(0, NEURON_PJRT_PROCESSES_NUM_DEVICES="2,2", NEURON_RT_VISIBLE_CORES="0",
                                           NEURON_RT_ROOT_COMM_ID=f"127.0.0.1:{_free_port()}"))
    assert error.code == P.ErrorCode.INVALID_ARGUMENT, error
    assert "NEURON_PJRT_PROCESSES_NUM_DEVICES gives process 0 2 NeuronCore(s), but it holds 1" in error.message
