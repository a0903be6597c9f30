"""Unreduced and reduced shardings on 2 and 8 NeuronCores against JAX's CPU backend (8 forced
host devices), on each engine build (issue 30): the CPU backend's numbers, or a compile error
that names the construct. Each run is one subprocess over every case and both core counts.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import pjrt_neuron.config as config

SCRIPT = Path(__file__).resolve().parent / "sharding_scripts" / "unreduced_sweep.py"
CORES = (2, 8)
CASES = ("reduce_sum_of_unreduced", "psum_into_unreduced", "reshard_unreduced_to_sharded",
         "dot_general_unreduced_output", "grad_through_unreduced", "reduced_input_grad")
_SCRUBBED = ("JAX_PLATFORMS", "XLA_FLAGS", "PJRT_NEURON_INSTANCE_TYPE", "NEURON_RT_VISIBLE_CORES",
             "NEURON_RT_NUM_CORES", "PJRT_NEURON_SIM_ENGINE")


def _sweep(platform: str, **settings) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PJRT_NEURON_LOCK_DIR=tempfile.mkdtemp(prefix="pjrt-neuron-unreduced-"))
    env.update(settings)
    run = subprocess.run([sys.executable, str(SCRIPT), platform, ",".join(map(str, CORES))], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return {int(n): cases for n, cases in json.loads(run.stdout.strip().splitlines()[-1]).items()}


@pytest.fixture(scope="module")
def on_cpu():
    return _sweep("cpu", JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8")


@pytest.fixture(scope="module", params=["lammps-jax-pjrt-cpu", "xla-cpu-pjrt"])
def on_neuron(request):
    if config.engine_builds()[request.param] is None:
        pytest.fail(f"engine build {request.param} is not installed (pip install '.[engine-jax]')")
    return request.param, _sweep("neuron", JAX_PLATFORMS="neuron,cpu", PJRT_NEURON_INSTANCE_TYPE="trn1.32xlarge",
                                 PJRT_NEURON_SIM_ENGINE=request.param)


def _same(got, want):
    np.testing.assert_allclose(np.asarray(got["value"]), np.asarray(want["value"]), rtol=1e-6, atol=1e-6)
    assert len(got["shards"]) == len(want["shards"])
    for g, w in zip(got["shards"], want["shards"]):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("cores", CORES)
def test_unreduced_and_reduced_give_the_cpu_backends_numbers_or_name_the_construct(on_cpu, on_neuron, cores):
    engine, results = on_neuron
    for case in CASES:
        want, got = on_cpu[cores][case], results[cores][case]
        assert "error" not in want, (case, want)
        if engine == "lammps-jax-pjrt-cpu":
            assert "error" not in got, (case, got)
            _same(got, want)
        else:
            # The older build reads these axes as replicated ([6, 6] where the CPU has [6, 0]).
            assert got.get("error") == "UnsupportedOnEngineError", (case, got)
            assert "unreduced axes" in got["message"] or "reduced axes" in got["message"]
            assert "xla_cpu_pjrt.so" in got["message"] and "PJRT_NEURON_SIM_ENGINE" in got["message"]


def test_the_issues_case_partial_sums_stay_partial(on_cpu, on_neuron):
    engine, results = on_neuron
    assert on_cpu[2]["reduce_sum_of_unreduced"]["shards"] == [6.0, 0.0]
    if engine == "lammps-jax-pjrt-cpu":
        assert results[2]["reduce_sum_of_unreduced"]["shards"] == [6.0, 0.0]
