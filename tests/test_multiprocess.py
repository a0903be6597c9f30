"""Many processes: torchrun, xmp.spawn and jax.distributed on simulated NeuronCores.

Every job here is two processes, one NeuronCore each, on one simulated trn1.2xlarge:

- examples/train_digits_ddp.py under `torchrun --nproc_per_node=2` and under `xmp.spawn`
  (NEURONCORE_NUM_DEVICES=2), data parallel over the `xla` process group: both ranks end with
  identical weights, and losses and accuracy equal the single-process run of the same script.
- multiprocess_scripts/jax_two_process.py as two `jax.distributed` processes: a global mesh
  over both processes' cores, psum / all_gather / ppermute across processes and a sharded
  training step, compared with the same two processes on JAX's CPU backend (gloo).
- torch-xla's collective helpers under torchrun (multiprocess_scripts/torch_collectives.py):
  xm.rendezvous with payloads, xm.mesh_reduce, xm.all_gather, xm.reduce_scatter, xm.save and
  the process group's all_reduce and broadcast, some of whose programs differ per rank.
- No silent hangs: a rank that skips a collective, or dies, makes its peer fail with a clear
  error, within PJRT_NEURON_COLLECTIVE_TIMEOUT or at once.

The C API side of the same machinery is in test_multiprocess_capi.py.
"""

from __future__ import annotations

import functools
import json
import re
import os
import socket
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import job_pool
from pjrt_neuron import config
from job_pool import Job, JobPool, uses, wanted_jobs

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "tests" / "multiprocess_scripts"
DDP_EXAMPLE = REPO / "examples" / "train_digits_ddp.py"
JAX_SCRIPT = SCRIPTS / "jax_two_process.py"
TORCH_COLLECTIVES = SCRIPTS / "torch_collectives.py"
LAUNCH = SCRIPTS / "launch.py"
TIMEOUT = 600
EPOCHS = "12"
LOSS_TOL = 1e-4

_SCRUBBED = (
    "PJRT_DEVICE", "CPU_NUM_DEVICES", "XLA_REGISTER_INSTALLED_PLUGINS", "NEURON_LIBRARY_PATH",
    "PJRT_NEURON_TORCH_PLUGIN", "PJRT_NEURON_INSTANCE_TYPE", "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES",
    "NEURON_LOGICAL_NC_CONFIG", "JAX_PLATFORMS", "XLA_USE_SPMD", "XLA_FLAGS", "NEURONCORE_NUM_DEVICES",
    "NEURON_PJRT_PROCESS_INDEX", "NEURON_PJRT_WORLD_SIZE", "NEURON_PJRT_PROCESSES_NUM_DEVICES",
    "PJRT_NEURON_COLLECTIVE_TIMEOUT", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
)


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _env(**settings) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PJRT_NEURON_LOCK_DIR"] = tempfile.mkdtemp(prefix="pjrt-neuron-mp-locks-")  # an instance each
    env["MASTER_ADDR"] = "127.0.0.1"
    env["MASTER_PORT"] = _free_port()
    env["PJRT_NEURON_COLLECTIVE_TIMEOUT"] = "120"
    env.update(settings)
    return env


def _jobs() -> dict:
    ddp = [str(DDP_EXAMPLE), "--epochs", EPOCHS]
    jax_pair = [sys.executable, str(LAUNCH), "2", str(JAX_SCRIPT)]
    return {  # longest first
        "ddp_torchrun": Job([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                             f"--master_port={_free_port()}", *ddp], _env(PJRT_DEVICE="NEURON")),
        "ddp_spawn": Job([sys.executable, *ddp, "--spawn"], _env(PJRT_DEVICE="NEURON", NEURONCORE_NUM_DEVICES="2")),
        "ddp_single": Job([sys.executable, *ddp], _env(PJRT_DEVICE="NEURON")),
        "torch_collectives": Job([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                                  f"--master_port={_free_port()}", str(TORCH_COLLECTIVES),
                                  os.path.join(tempfile.mkdtemp(prefix="pjrt-neuron-mp-save-"), "checkpoint.pt")],
                                 _env(PJRT_DEVICE="NEURON", PJRT_NEURON_COLLECTIVE_TIMEOUT="60")),
        "jax_neuron": Job(jax_pair, _env(JAX_PLATFORMS="neuron")),
        "jax_cpu": Job(jax_pair, _env(JAX_PLATFORMS="cpu")),
        "jax_skip_collective": Job([*jax_pair, "--check", "psum", "--skip-collective", "--skip-sleep", "30"],
                                   _env(JAX_PLATFORMS="neuron", PJRT_NEURON_COLLECTIVE_TIMEOUT="5")),
        "jax_die": Job([*jax_pair, "--check", "psum", "--die-after-init"], _env(JAX_PLATFORMS="neuron")),
    }


@pytest.fixture(scope="module")
def results(request):
    with JobPool(_jobs(), wanted_jobs(request), workers=2,
                 run=functools.partial(job_pool.run, cwd=REPO, timeout=TIMEOUT)) as pool:
        yield pool


# ---------------------------------------------------------------- torch-xla: torchrun and xmp.spawn


def _ddp(results, name) -> tuple[dict, str]:
    result = results[name].ok()
    return results.json(name), result.stdout


def _rank_hashes(stdout: str) -> dict:
    # The ranks share one stdout, so a rank's line may start in the middle of another's.
    return {int(rank): digest for rank, digest in re.findall(r"rank (\d+) weights sha256 ([0-9a-f]{64})", stdout)}


@uses("ddp_torchrun", "ddp_spawn")
@pytest.mark.parametrize("launcher", ["ddp_torchrun", "ddp_spawn"])
def test_ddp_ranks_end_with_identical_weights(results, launcher):
    report, stdout = _ddp(results, launcher)
    assert report["world_size"] == 2
    hashes = _rank_hashes(stdout)
    assert sorted(hashes) == [0, 1], stdout[-2000:]
    assert hashes[0] == hashes[1]
    assert report["weight_sha256_per_rank"] == [hashes[0], hashes[1]]


@uses("ddp_torchrun", "ddp_spawn", "ddp_single")
@pytest.mark.parametrize("launcher", ["ddp_torchrun", "ddp_spawn"])
def test_ddp_trains_like_the_single_process_run(results, launcher):
    # Gradients averaged over two half batches are the gradient of the whole batch: the same
    # training, up to the order of float additions.
    parallel, _ = _ddp(results, launcher)
    single, _ = _ddp(results, "ddp_single")
    assert single["world_size"] == 1
    np.testing.assert_allclose(parallel["losses"], single["losses"], rtol=LOSS_TOL)
    assert parallel["test_accuracy"] >= 0.95
    assert abs(parallel["test_accuracy"] - single["test_accuracy"]) <= 0.01


@uses("ddp_torchrun", "ddp_spawn")
def test_torchrun_and_xmp_spawn_train_identically(results):
    torchrun, _ = _ddp(results, "ddp_torchrun")
    spawn, _ = _ddp(results, "ddp_spawn")
    assert torchrun["weight_sha256_per_rank"] == spawn["weight_sha256_per_rank"]
    assert torchrun["losses"] == spawn["losses"]


# ---------------------------------------------------------------- JAX: two jax.distributed processes


@uses("torch_collectives")
def test_torch_xla_collective_helpers_work_across_processes(results):
    if config.engine_build_for("torch-xla") == "lammps-jax-pjrt-cpu":
        # The ranks' programs differ (each its own payload) while their collectives correspond;
        # that build meets only launches of one program, so the job is refused, not hung or wrong.
        run = results["torch_collectives"]
        assert run.returncode != 0, run.describe()
        assert "ran different programs whose collectives correspond" in run.stderr, run.describe()
        return
    stdout = results["torch_collectives"].ok().stdout
    # The ranks share torchrun's stdout, so one rank's line can land in the middle of another's.
    decoder = json.JSONDecoder()
    reports = sorted((decoder.raw_decode(stdout, at)[0] for at in range(len(stdout))
                      if stdout.startswith('{"rank"', at)), key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == [0, 1], stdout[-2000:]
    for r in reports:
        assert r["world"] == 2
        assert r["rendezvous"] == ["rank 0", "rank 1"]  # each rank's payload, in rank order
        assert r["mesh_reduce"] == 3.0  # 1 + 2
        assert r["all_gather"] == [[0.0, 1.0], [10.0, 11.0]]
        assert r["all_reduce"] == [3.0, 6.0]
        assert r["broadcast"] == [6.0]  # rank 1's value
        assert r["saved"] == [0.0, 0.0, 0.0]  # the master's tensor
    # arange(4) * 1 + arange(4) * 2, split in two: rank r gets elements 2r and 2r + 1.
    assert [r["reduce_scatter"] for r in reports] == [[0.0, 3.0], [6.0, 9.0]]


def _pair(results, name) -> list[dict]:
    report = json.loads(results[name].ok().stdout.strip().splitlines()[-1])
    return report["processes"]


def _pair_results(results, name) -> list[dict]:
    processes = _pair(results, name)
    for p in processes:
        assert p["returncode"] == 0 and p["result"] is not None, (name, p["stdout"], p["stderr"])
    return [p["result"] for p in processes]


@uses("jax_neuron")
def test_jax_processes_see_the_whole_job_and_their_own_core(results):
    for index, r in enumerate(_pair_results(results, "jax_neuron")):
        assert r["platform"] == "neuron"
        assert (r["process"], r["process_count"]) == (index, 2)
        assert (r["device_count"], r["local_device_count"]) == (2, 1)
        assert r["device_ids"] == [0, 1] and r["device_process_indices"] == [0, 1]
        assert r["local_rows"] == [[4 * index, 4 * index + 4]]
        assert r["problems"] == []


@uses("jax_neuron", "jax_cpu")
@pytest.mark.parametrize("check", ["psum", "all_gather", "ppermute", "global_array"])
def test_jax_cross_process_collectives_equal_the_cpu_backend(results, check):
    neuron = _pair_results(results, "jax_neuron")
    cpu = _pair_results(results, "jax_cpu")
    assert cpu[0]["device_count"] == 2  # the reference really spans two processes
    for n, c in zip(neuron, cpu):
        assert n[check] == c[check]
    assert neuron[0][check] == neuron[1][check]


@uses("jax_neuron", "jax_cpu")
def test_jax_sharded_training_step_across_processes_equals_the_cpu_backend(results):
    neuron = _pair_results(results, "jax_neuron")
    cpu = _pair_results(results, "jax_cpu")
    for n, c in zip(neuron, cpu):
        np.testing.assert_allclose(n["losses"], c["losses"], rtol=1e-5)
        np.testing.assert_allclose(n["final_params"]["w"], c["final_params"]["w"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(n["final_params"]["b"], c["final_params"]["b"], rtol=1e-5, atol=1e-6)
    assert neuron[0]["final_params"] == neuron[1]["final_params"]
    assert neuron[0]["losses"][-1] < neuron[0]["losses"][0] / 2


# ---------------------------------------------------------------- no silent hangs


@uses("jax_skip_collective")
def test_a_rank_that_skips_a_collective_fails_its_peer_after_the_timeout(results):
    first, second = _pair(results, "jax_skip_collective")
    assert first["returncode"] != 0, first["stdout"]
    error = (first["result"] or {}).get("error", "")
    assert error.startswith("DEADLINE_EXCEEDED: PJRT_LoadedExecutable_Execute"), (first["stdout"], first["stderr"])
    assert "waited 5 s for NeuronCore(s) 1 to join" in error
    assert first["seconds"] < 60


@uses("jax_die")
def test_a_rank_that_dies_fails_its_peer_at_once(results):
    first, second = _pair(results, "jax_die")
    assert second["returncode"] == 3
    assert first["returncode"] != 0, first["stdout"]
    error = (first["result"] or {}).get("error", "")
    assert error.startswith("ABORTED: PJRT_LoadedExecutable_Execute"), (first["stdout"], first["stderr"])
    assert "NeuronCore" in error and "exited" in error
    assert first["seconds"] < 60  # the timeout is 120 s
