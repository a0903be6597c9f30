"""`pjrt-neuron selftest` and `pjrt-neuron ls` on both engines: the simulator, and the neuron
engine on the Neuron stand-in (tests/neuron_standin), including a fault the stand-in injects.

Each selftest is one run of the command in a subprocess; the neuron runs share a compile cache,
so only the first compiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CONVERTER = f"'{sys.executable}' '{REPO / 'pjrt_neuron' / '_neuron_mlir_to_hlo.py'}'"
ELEMENT_TYPES = ("float32", "bfloat16", "float16", "float64", "float8_e4m3fn", "float8_e5m2", "int8", "int16",
                 "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "complex64")
CHECKS = ["list_cores", *(f"round_trip_{t}" for t in ELEMENT_TYPES), "add", "matmul", "donated_update",
          "all_reduce_two_cores", "sharded_jit_two_cores", "over_hbm_allocation"]
TIMEOUT = 600


@pytest.fixture(scope="module")
def neuron_cache():
    with tempfile.TemporaryDirectory(prefix="pjrt-neuron-selftest-cache-") as directory:
        yield directory


def environment(engine: str, standin=None, cache: str | None = None, **extra) -> dict:
    scrubbed = {k: v for k, v in os.environ.items()
                if k not in ("JAX_PLATFORMS", "PJRT_DEVICE", "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES")}
    env = dict(scrubbed, PJRT_NEURON_LOCK_DIR=tempfile.mkdtemp(prefix="pjrt-neuron-locks-"),
               NEURON_COMPILE_CACHE_URL=cache or tempfile.mkdtemp(prefix="pjrt-neuron-cache-"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    if engine == "neuron":
        env.update(standin.environment(tempfile.mkdtemp(prefix="nrt-locks-")))
        env.update(PJRT_NEURON_ENGINE="neuron", PJRT_NEURON_NRT_LIBRARY=str(standin.libnrt),
                   PJRT_NEURON_MLIR_CONVERTER=CONVERTER, PJRT_NEURON_COMPILE_PROGRESS_SECONDS="0")
    else:
        env["PJRT_NEURON_ENGINE"] = "sim"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pjrt_neuron", *args], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=REPO)


def selftest_json(env: dict) -> tuple[int, dict]:
    run = cli(env, "selftest", "--json")
    assert run.stdout.strip().startswith("{"), run.stderr[-3000:]
    return run.returncode, json.loads(run.stdout)


def check_report_shape(report: dict) -> dict:
    """The report's fields; returns the checks by name."""
    header = report["header"]
    for key in ("plugin_version", "library_version", "engine", "python_version", "jax_version", "jaxlib_version",
                "platform_version", "platform"):
        assert header.get(key), (key, header)
    import pjrt_neuron
    assert header["plugin_version"] == pjrt_neuron.__version__
    assert [c["name"] for c in report["checks"]] == CHECKS
    for c in report["checks"]:
        assert c["status"] in ("pass", "fail", "skip") and isinstance(c["seconds"], float), c
        assert isinstance(c["error"], str), c
    return {c["name"]: c for c in report["checks"]}


def test_selftest_passes_on_the_simulator():
    code, report = selftest_json(environment("sim"))
    checks = check_report_shape(report)
    assert report["header"]["engine"] == "sim" and "XLA CPU" in report["header"]["platform_version"]
    assert code == 0 and report["passed"], [c for c in report["checks"] if c["status"] != "pass"]
    assert all(c["status"] == "pass" for c in report["checks"])
    assert checks["list_cores"]["details"]["cores"] == 2
    hbm = checks["over_hbm_allocation"]["details"]
    assert hbm["requested_bytes"] > hbm["hbm_bytes"] == 16 << 30 and "out of HBM" in hbm["message"]


def test_selftest_passes_on_the_neuron_engine_and_names_the_versions(standin, neuron_cache):
    code, report = selftest_json(environment("neuron", standin, neuron_cache))
    checks = check_report_shape(report)
    header = report["header"]
    assert header["engine"] == "neuron"
    assert header["runtime_version"].startswith("2.26.0.0 (neuron-standin")  # the stand-in's nrt_get_version
    assert "2.21.0.0+standin" in header["compiler_version"]                  # its `neuronx-cc --version`
    assert header["instance_family"] == "trn1" and header["visible_cores"] == 2 == header["total_cores"]
    assert header["neuron_library"] == str(standin.libnrt)
    assert "neuronx-cc" in header["platform_version"] and "simulated" not in header["platform_version"]
    assert code == 0 and report["passed"], [c for c in report["checks"] if c["status"] != "pass"]
    assert all(c["status"] == "pass" for c in report["checks"])
    assert checks["list_cores"]["details"]["hbm_bytes_per_core"] == [16 << 30, 16 << 30]
    message = checks["over_hbm_allocation"]["details"]["message"]
    # The plugin's own HBM accounting refuses it before the runtime is asked.
    assert message.startswith("RESOURCE_EXHAUSTED") and "NeuronCore 0 is out of HBM" in message, message


def test_selftest_reports_an_injected_fault(standin, neuron_cache):
    # The stand-in's first nrt_execute (the add) fails as an uncorrectable NeuronCore error.
    run = cli(environment("neuron", standin, neuron_cache, NEURON_STANDIN_FAULT="nrt_execute:1:1202"), "selftest")
    assert run.returncode == 1, run.stdout + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    (add,) = [line for line in lines if line.startswith(("PASS  add ", "FAIL  add "))]
    assert add.startswith("FAIL  add ") and "NRT_EXEC_HW_ERR_NC_UE (1202)" in add and "INTERNAL" in add, add
    assert any(line.startswith("PASS  matmul ") for line in lines), run.stdout  # the client stays usable
    assert lines[-1].startswith("FAILED: ") and " 1 failed" in lines[-1], lines[-1]
    assert "engine: neuron" in run.stdout and "runtime: 2.26.0.0" in run.stdout


def test_selftest_without_jax_says_what_to_install():
    script = ("import sys; sys.modules['jax'] = None\n"
              "from pjrt_neuron import cli; sys.exit(cli.main(['selftest']))")
    run = subprocess.run([sys.executable, "-c", script], env=environment("sim"), capture_output=True, text=True,
                         timeout=TIMEOUT, cwd=REPO)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "JAX, which is not installed: pip install 'jax==0.10.*'" in run.stdout, run.stdout
    assert "jax not installed" in run.stdout


def test_ls_on_the_neuron_engine_lists_what_the_runtime_reports(standin):
    env = environment("neuron", standin, NEURON_STANDIN_INSTANCE="inf2.xlarge", NEURON_STANDIN_HBM_BYTES=3 << 30)
    run = cli(env, "ls", "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["engine"] == "neuron" and report["instance_family"] == "inf2", report
    assert report["hbm_bytes_per_core"] == [3 << 30] * report["visible_cores"] and report["visible_cores"] >= 1
    assert report["runtime_version"].startswith("2.26.0.0")
    text = cli(env, "ls")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[:2] == ["engine: neuron (the Neuron runtime)", f"runtime library: {standin.libnrt}"]
    assert "instance family: inf2" in text.stdout and "core 0: 3 GB HBM (3221225472 bytes)" in text.stdout
    assert "simulated" not in text.stdout


def test_ls_on_the_neuron_engine_when_another_process_holds_the_cores(standin):
    env = environment("neuron", standin)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.path.insert(0, 'tests'); import pjrt_capi as P, pjrt_neuron\n"
                               "c = P.Client(P.Api(pjrt_neuron.library_path())); print('held', flush=True)\n"
                               "sys.stdin.read()"],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout.readline().strip() == "held"
        run = cli(env, "ls", "--json")
    finally:
        holder.communicate("", timeout=60)
    report = json.loads(run.stdout)
    assert run.returncode == 0 and report["visible_cores"] == 2, run.stderr
    assert "nrt_init" in report["hbm_error"] and "NRT_RESOURCE (4)" in report["hbm_error"], report


def test_ls_on_the_simulator_says_simulated():
    run = cli(environment("sim"), "ls", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["engine"] == "sim"
    text = cli(environment("sim"), "ls").stdout.splitlines()
    assert text[:2] == ["engine: sim (simulated NeuronCores)", "instance-type: trn1.2xlarge (simulated)"]
