"""Unreduced and reduced shardings on 2 and 8 NeuronCores against JAX's CPU backend (8 forced
host devices), on each engine build (issue 30): the CPU backend's numbers, or, for the constructs
the older build computes wrongly (and only those), a compile error that names the construct. Each run is one subprocess over every case and both core counts.
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
CASES = ("reduce_sum_of_unreduced", "reduce_sum_of_assembled_unreduced", "psum_into_unreduced",
         "reshard_unreduced_to_sharded", "dot_general_unreduced_output", "grad_through_unreduced",
         "reduced_input_grad")
# The cases that make a replicated value unreduced, which the older build keeps on every core
# (measured with its guard removed: [6, 6] for [6, 0], twice the value after a reshard).
WRONG_ON_THE_OLDER_BUILD = ("reduce_sum_of_unreduced", "reshard_unreduced_to_sharded", "reduced_input_grad")
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
        if engine == "xla-cpu-pjrt" and case in WRONG_ON_THE_OLDER_BUILD:
            assert got.get("error") == "UnsupportedOnEngineError", (case, got)
            assert "a replicated value given unreduced axes ['x']" in got["message"], got["message"]
            assert "xla_cpu_pjrt.so" in got["message"] and "PJRT_NEURON_SIM_ENGINE" in got["message"]
        else:
            assert "error" not in got, (case, got)
            _same(got, want)


def test_the_issues_case_partial_sums_stay_partial(on_cpu, on_neuron):
    engine, results = on_neuron
    assert on_cpu[2]["reduce_sum_of_unreduced"]["shards"] == [6.0, 0.0]
    if engine == "lammps-jax-pjrt-cpu":
        assert results[2]["reduce_sum_of_unreduced"]["shards"] == [6.0, 0.0]


OLDER = "cpu; XLA CPU (PJRT 0.81, xla_cpu_pjrt.so)"
NEWER = "cpu; XLA CPU (PJRT 0.115, pjrt_c_api_cpu_plugin.so)"
_HEAD = 'module @m {\n  func.func public @main(%arg0: tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]ARG>}) -> (tensor<4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}], unreduced={"x"}>}) {\n'


def _module(arg_axes: str, body: str) -> str:
    return _HEAD.replace("ARG", arg_axes) + body + "  }\n}\n"


@pytest.mark.parametrize("body, arg_axes, refused", [
    # A reshard of a replicated argument to unreduced: the older build keeps it on every core.
    ('    %0 = sdy.sharding_constraint %arg0 <@mesh, [{}], unreduced={"x"}> : tensor<4xf32>\n    return %0 : tensor<4xf32>\n', "", True),
    # A constant made unreduced (the cotangent of a reduced input).
    ('    %cst = stablehlo.constant dense<1.0> : tensor<4xf32>\n    %0 = sdy.sharding_constraint %cst <@mesh, [{}], unreduced={"x"}> : tensor<4xf32>\n    return %0 : tensor<4xf32>\n', "", True),
    # A replicated argument returned as unreduced.
    ("    return %arg0 : tensor<4xf32>\n", "", True),
    # A computed value left unreduced (a dot contracted over a sharded axis): computed right.
    ('    %0 = stablehlo.dot_general %arg0, %arg0, contracting_dims = [0] x [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n    %1 = sdy.sharding_constraint %0 <@mesh, [{}], unreduced={"x"}> : tensor<4xf32>\n    return %1 : tensor<4xf32>\n', "", False),
    # An argument that is unreduced already, passed on.
    ('    %0 = sdy.sharding_constraint %arg0 <@mesh, [{}], unreduced={"x"}> : tensor<4xf32>\n    return %0 : tensor<4xf32>\n', ', unreduced={"x"}', False),
])
def test_the_older_builds_guard_refuses_only_replicated_values_made_unreduced(body, arg_axes, refused):
    from pjrt_neuron._jax_engine_guard import UnsupportedOnEngineError, check_module_text

    text = _module(arg_axes, body)
    check_module_text(text, NEWER, "m")  # the newer build computes every case
    if not refused:
        check_module_text(text, OLDER, "m")
        return
    with pytest.raises(UnsupportedOnEngineError, match=r"'m' has a replicated value .*unreduced axes \['x'\].*xla_cpu_pjrt\.so"):
        check_module_text(text, OLDER, "m")


def test_the_older_builds_guard_refuses_reduced_axes():
    from pjrt_neuron._jax_engine_guard import UnsupportedOnEngineError, check_module_text

    text = _module(', reduced={"x"}', "    return %arg0 : tensor<4xf32>\n")
    with pytest.raises(UnsupportedOnEngineError, match=r"reduced axes \(reduced=\{\"x\"\}"):
        check_module_text(text, OLDER, "m")
