"""pytest-xdist on NEURON devices: the package's pytest plugin gives each worker cores of its own."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("xdist")

# Each test records which NeuronCores its worker saw, and checks a result against numpy.
PROJECT_TEST = textwrap.dedent("""
    import json, os
    import jax, jax.numpy as jnp, numpy as np
    import pytest

    def record(name):
        ids = sorted(d.id for d in jax.devices("neuron"))
        path = os.path.join(os.environ["XDIST_RECORD_DIR"], name + ".json")
        with open(path, "w") as f:
            json.dump({"worker": os.environ.get("PYTEST_XDIST_WORKER"), "cores": ids}, f)

    # Several cases, so that every worker gets some.
    @pytest.mark.parametrize("case", range(4))
    def test_sum_on_neuron(case):
        record(f"sum{case}")
        x = jnp.arange(8, dtype=jnp.float32) + case
        np.testing.assert_allclose(np.asarray(jax.jit(lambda v: (v * v).sum())(x)), float(((np.arange(8) + case) ** 2).sum()))

    @pytest.mark.parametrize("case", range(4))
    def test_matmul_on_neuron(case):
        record(f"matmul{case}")
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        np.testing.assert_allclose(np.asarray(jax.jit(jnp.matmul)(a, a.T)), a @ a.T, rtol=1e-6)
""")


def _plugin_args() -> list[str]:
    # Installed, the entry point loads the plugin; from a source checkout it must be named.
    installed = any(e.name == "pjrt_neuron" for e in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", "pjrt_neuron.pytest_plugin"]


def _run_xdist(tmp_path: Path, workers: int, **env_overrides: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    project = tmp_path / "project"
    records = tmp_path / "records"
    project.mkdir()
    records.mkdir()
    (project / "test_project.py").write_text(PROJECT_TEST)
    env = dict(os.environ, JAX_PLATFORMS="neuron", XDIST_RECORD_DIR=str(records),
               PJRT_NEURON_LOCK_DIR=str(tmp_path / "locks"), PJRT_NEURON_COMPILE_CACHE="0", **env_overrides)
    for name in ("NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "PJRT_NEURON_XDIST"):
        if name not in env_overrides:
            env.pop(name, None)
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", str(workers), "-p", "xdist",
                          *_plugin_args(), str(project)],
                         cwd=project, env=env, capture_output=True, text=True, timeout=300)
    found = [json.loads(p.read_text()) for p in sorted(records.glob("*.json"))]
    return run, found


def test_two_workers_on_two_cores_each_get_one_core(tmp_path):
    run, records = _run_xdist(tmp_path, 2, PJRT_NEURON_INSTANCE_TYPE="trn1.2xlarge")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "2 xdist workers share trn1.2xlarge: 1 NeuronCore(s) each" in run.stdout
    cores_by_worker = {r["worker"]: tuple(r["cores"]) for r in records}
    assert len(records) == 8 and len(cores_by_worker) == 2, records
    assert sorted(cores_by_worker.values()) == [(0,), (1,)], records


def test_more_workers_than_cores_each_get_an_instance(tmp_path):
    run, records = _run_xdist(tmp_path, 3, PJRT_NEURON_INSTANCE_TYPE="trn1.2xlarge")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "more than trn1.2xlarge's 2 NeuronCores: each worker simulates an instance of its own" in run.stdout
    assert records and all(r["cores"] == [0, 1] for r in records), records


def test_a_run_started_inside_a_worker_plans_its_own_workers(tmp_path):
    # A pytest run started from an xdist worker inherits the worker's variables; its controller
    # must not take them as its own (it would pin every one of its workers to core 1).
    run, records = _run_xdist(tmp_path, 2, PJRT_NEURON_INSTANCE_TYPE="trn1.2xlarge",
                              PYTEST_XDIST_WORKER="gw1", PYTEST_XDIST_WORKER_COUNT="2")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    cores_by_worker = {r["worker"]: tuple(r["cores"]) for r in records}
    assert sorted(cores_by_worker.values()) == [(0,), (1,)], records


def test_turned_off_workers_collide_on_the_cores(tmp_path):
    run, _ = _run_xdist(tmp_path, 2, PJRT_NEURON_INSTANCE_TYPE="trn1.2xlarge", PJRT_NEURON_XDIST="0")
    output = run.stdout + run.stderr
    assert run.returncode != 0, output[-3000:]
    assert "already in use" in output, output[-3000:]


def test_whole_instances_give_every_worker_every_core(tmp_path):
    run, records = _run_xdist(tmp_path, 2, PJRT_NEURON_INSTANCE_TYPE="trn1.2xlarge", PJRT_NEURON_XDIST="instance")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "2 xdist workers, each simulating a trn1.2xlarge of its own (PJRT_NEURON_XDIST=instance)" in run.stdout
    assert len({r["worker"] for r in records}) == 2, records
    assert all(r["cores"] == [0, 1] for r in records), records


def test_plan_splits_cores_evenly():
    from pjrt_neuron.pytest_plugin import plan

    assert plan(0, 2, 32, "/locks") == {"NEURON_RT_VISIBLE_CORES": "0-15"}
    assert plan(1, 2, 32, "/locks") == {"NEURON_RT_VISIBLE_CORES": "16-31"}
    assert plan(2, 3, 2, "/locks")["PJRT_NEURON_LOCK_DIR"].startswith("/locks/xdist-")
    assert plan(0, 2, 32, "/locks", whole_instances=True)["PJRT_NEURON_LOCK_DIR"].startswith("/locks/xdist-")
