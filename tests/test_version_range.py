"""The framework versions the one built plugin supports, as measured: JAX 0.7-0.10, torch-xla 2.8-2.9.

The pinned versions (JAX 0.10.2, torch-xla 2.9.0) are tested by the rest of the suite. The older
ones live side by side in a directory that `.ci/install_versions.sh` fills (`jax-0.7.2/`,
`torch-xla-2.8.1/`, ... each a `pip install --target` of the framework alone, put in front of
the test venv's packages); PJRT_NEURON_VERSIONS_DIR names it (default: build/versions).
Each version runs the smoke set on NEURON and on the CPU backend, and the numbers must agree.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import job_pool
from job_pool import Job, JobPool

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent / "version_scripts"
TORCH_SCRIPTS = Path(__file__).resolve().parent / "torch_scripts"
VERSIONS_DIR = Path(os.environ.get("PJRT_NEURON_VERSIONS_DIR", REPO / "build" / "versions"))
TIMEOUT = 600


def _installed(prefix: str) -> list[str]:
    if not VERSIONS_DIR.is_dir():
        return []
    return sorted(p.name[len(prefix):] for p in VERSIONS_DIR.iterdir() if p.name.startswith(prefix))


JAX_VERSIONS = _installed("jax-")
TORCH_XLA_VERSIONS = _installed("torch-xla-")
if not JAX_VERSIONS and not TORCH_XLA_VERSIONS:
    pytest.skip(f"no framework versions installed in {VERSIONS_DIR}; run .ci/install_versions.sh "
                f"{sys.executable} {VERSIONS_DIR}", allow_module_level=True)


def _env(packages: Path, **settings) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "PJRT_DEVICE"))}
    env["PYTHONPATH"] = os.pathsep.join([str(packages), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PJRT_NEURON_LOCK_DIR"] = tempfile.mkdtemp(prefix="pjrt-neuron-locks-")
    env.update(settings)
    return env


def _jobs() -> dict:
    jobs = {}
    for version in TORCH_XLA_VERSIONS:
        packages = VERSIONS_DIR / f"torch-xla-{version}"
        mlp = [sys.executable, str(TORCH_SCRIPTS / "train_mlp.py")]
        jobs[f"torch-xla {version} neuron"] = Job(mlp, _env(packages, PJRT_DEVICE="NEURON"))
        jobs[f"torch-xla {version} cpu"] = Job(mlp, _env(packages, PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1"))
    for version in JAX_VERSIONS:
        packages = VERSIONS_DIR / f"jax-{version}"
        example = [sys.executable, str(REPO / "examples" / "train_digits_jax.py"), "--epochs", "20"]
        jobs[f"jax {version} digits"] = Job(example, _env(packages, JAX_PLATFORMS="neuron"))
        for platform in ("neuron", "cpu"):
            jobs[f"jax {version} smoke {platform}"] = Job(
                [sys.executable, str(SCRIPTS / "jax_smoke.py"), platform],
                _env(packages, JAX_PLATFORMS=platform, XLA_FLAGS="--xla_force_host_platform_device_count=2"))
    return jobs


@pytest.fixture(scope="module")
def results(request):
    with JobPool(_jobs(), set(_jobs()), workers=2,
                 run=functools.partial(job_pool.run, cwd=REPO, timeout=TIMEOUT)) as pool:
        yield pool


@pytest.mark.parametrize("version", JAX_VERSIONS)
def test_jax_smoke_set_matches_cpu(results, version):
    neuron = results.json(f"jax {version} smoke neuron")
    cpu = results.json(f"jax {version} smoke cpu")
    assert neuron["jax"] == cpu["jax"] == version
    assert neuron["platform"] == "neuron" and neuron["devices"] == 2
    for key in ("jit", "grad", "shard_map_psum"):
        np.testing.assert_allclose(neuron[key], cpu[key], rtol=1e-6, atol=1e-6, err_msg=key)
    assert neuron["shard_map_psum"] == [4.0, 6.0, 8.0, 10.0]


@pytest.mark.parametrize("version", JAX_VERSIONS)
def test_jax_digits_example_trains(results, version):
    run = results[f"jax {version} digits"].ok()
    assert "platform: neuron" in run.stdout
    accuracy = float(run.stdout.rsplit("test accuracy:", 1)[1].split()[0])
    assert accuracy >= 0.95, run.stdout[-2000:]


@pytest.mark.parametrize("version", TORCH_XLA_VERSIONS)
def test_torch_xla_mlp_training_matches_cpu(results, version):
    neuron = results.json(f"torch-xla {version} neuron")
    cpu = results.json(f"torch-xla {version} cpu")
    assert neuron["device_type"] == "NEURON" and cpu["device_type"] == "CPU"
    for optimizer in ("sgd", "adam"):
        assert neuron[optimizer] == pytest.approx(cpu[optimizer], abs=1e-5, rel=0), optimizer
        assert neuron[optimizer][-1] < neuron[optimizer][0] - 0.1
