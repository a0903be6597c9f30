"""PyTorch on NeuronCores beside torch-xla's lazy tensors: torchax (PyTorch on JAX) and
torch.compile(backend="openxla"), each example against its CPU run."""

from __future__ import annotations

import functools
import os
import re
import sys
import tempfile
from pathlib import Path

import pytest

import job_pool
from job_pool import Job, JobPool, uses, wanted_jobs

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
TIMEOUT = 420


def _env(**settings) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "PJRT_DEVICE"))}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PJRT_NEURON_LOCK_DIR"] = tempfile.mkdtemp(prefix="pjrt-neuron-locks-")
    env.update(settings)
    return env


def _jobs() -> dict:
    torchax = [sys.executable, str(EXAMPLES / "train_digits_torchax.py")]
    compiled = [sys.executable, str(EXAMPLES / "train_digits_torch_compile.py")]
    return {
        "compile_neuron": Job(compiled, _env(PJRT_DEVICE="NEURON")),
        "compile_cpu": Job(compiled, _env(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1")),
        "torchax_neuron": Job(torchax, _env(JAX_PLATFORMS="neuron")),
        "torchax_cpu": Job(torchax, _env(JAX_PLATFORMS="cpu")),
    }


@pytest.fixture(scope="module")
def results(request):
    with JobPool(_jobs(), wanted_jobs(request), workers=2,
                 run=functools.partial(job_pool.run, cwd=REPO, timeout=TIMEOUT)) as pool:
        yield pool


def _losses(stdout: str) -> list[float]:
    return [float(x) for x in re.findall(r"epoch \d+/\d+  loss ([0-9.]+)", stdout)]


def _accuracy(stdout: str) -> float:
    return float(stdout.rsplit("test accuracy:", 1)[1].split()[0])


def _torchax_importable() -> None:
    # torchax 0.0.13 imports flax at import time; the test extra installs both, so a failed
    # import is a broken install, not a route to skip.
    import torchax  # noqa: F401


@uses("torchax_neuron", "torchax_cpu", "compile_neuron", "compile_cpu")
@pytest.mark.parametrize("route", ["torchax", "compile"])
def test_route_trains_on_neuron_like_cpu(results, route):
    if route == "torchax":
        _torchax_importable()
    neuron_run = results[f"{route}_neuron"].ok()
    # Quiet by default: nothing in these examples changes on Trainium.
    assert "pjrt-neuron: Trainium" not in neuron_run.stderr, neuron_run.describe()
    neuron = neuron_run.stdout
    cpu = results[f"{route}_cpu"].ok().stdout
    assert len(_losses(neuron)) == 20
    assert _losses(neuron) == pytest.approx(_losses(cpu), abs=1e-3), (neuron, cpu)
    assert _accuracy(neuron) >= 0.95
    assert abs(_accuracy(neuron) - _accuracy(cpu)) <= 0.01


@uses("torchax_neuron")
def test_torchax_runs_on_neuron_devices(results):
    _torchax_importable()
    assert "platform: neuron" in results["torchax_neuron"].ok().stdout


@uses("compile_neuron")
def test_torch_compile_runs_on_neuron_devices(results):
    assert "(NEURON)" in results["compile_neuron"].ok().stdout
