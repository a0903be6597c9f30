"""Host offload in JAX on the newer engine build (lammps-jax-pjrt-cpu), against the CPU
backend (issue 30): one jitted output placed in pinned_host (committed argument or not), two
outputs of which one is placed there, jax.device_put to pinned_host inside jit, and activation
offload through jax.checkpoint's offload_dot_with_no_batch_dims policy. Values and memory kinds
as on the CPU, and HBM charged only for the results that stay on the device.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import pjrt_neuron.config as config

SCRIPT = Path(__file__).resolve().parent / "offload_scripts" / "host_offload.py"
CASES = ("one_output_to_pinned_host_uncommitted", "one_output_to_pinned_host_committed",
         "two_outputs_one_to_pinned_host", "device_put_to_pinned_host_inside_jit",
         "checkpoint_offload_dot_with_no_batch_dims")


@pytest.fixture(scope="module")
def report():
    if config.engine_builds()["lammps-jax-pjrt-cpu"] is None:
        pytest.fail("engine build lammps-jax-pjrt-cpu is not installed (pip install '.[engine-jax]')")
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_NEURON_SIM_ENGINE", "XLA_FLAGS")}
    env.update(JAX_PLATFORMS="neuron,cpu", TF_CPP_MIN_LOG_LEVEL="2", PJRT_NEURON_SIM_ENGINE="lammps-jax-pjrt-cpu",
               PJRT_NEURON_LOCK_DIR=tempfile.mkdtemp(prefix="pjrt-neuron-offload-"))
    run = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", CASES)
def test_host_offload_matches_the_cpu_backend(report, case):
    neuron, cpu = report[case]["neuron"], report[case]["cpu"]
    assert "error" not in cpu, cpu
    assert "error" not in neuron, neuron
    assert neuron["values"] == cpu["values"]
    assert neuron["memory_kinds"] == cpu["memory_kinds"]
    # pinned_host results are not charged to the core's HBM; the device ones are, and nothing else stays.
    assert neuron["hbm_bytes_beyond_start"] == neuron["device_bytes_of_results"]
