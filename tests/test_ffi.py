"""jax.ffi on NeuronCores (issue 30): a typed FFI handler compiled here, registered through the
plugin's FFI extension, runs on the simulator against the same handler on JAX's CPU backend; the
older engine build, which never finds handlers, says so. Bad registrations fail naming the
function, through the C API.
"""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import pjrt_neuron.config as config

SCRIPTS = Path(__file__).resolve().parent / "ffi_scripts"


@pytest.fixture(scope="module")
def handler_library(tmp_path_factory):
    jax_ffi = pytest.importorskip("jax.ffi")
    compiler = shutil.which("c++") or shutil.which("g++")
    assert compiler, "a C++ compiler is needed to build the test's FFI handler"
    out = tmp_path_factory.mktemp("ffi") / "libtwice_plus_one.so"
    subprocess.run([compiler, "-std=c++17", "-O1", "-fPIC", "-shared", "-w", f"-I{jax_ffi.include_dir()}",
                    str(SCRIPTS / "add_one.cc"), "-o", str(out)], check=True, capture_output=True, text=True)
    return out


def _round_trip(library: Path, engine: str) -> dict:
    if config.engine_builds()[engine] is None:
        pytest.fail(f"engine build {engine} is not installed (pip install '.[engine-jax]')")
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_NEURON_ENGINE_LIBRARY", "NEURON_RT_VISIBLE_CORES")}
    report = Path(tempfile.mkdtemp(prefix="pjrt-neuron-ffi-report-")) / "findings.jsonl"
    env.update(JAX_PLATFORMS="neuron,cpu", PJRT_NEURON_SIM_ENGINE=engine, TF_CPP_MIN_LOG_LEVEL="2",
               PJRT_NEURON_LOCK_DIR=tempfile.mkdtemp(prefix="pjrt-neuron-ffi-"), PJRT_NEURON_COMPAT="warn",
               PJRT_NEURON_COMPAT_REPORT=str(report))
    run = subprocess.run([sys.executable, str(SCRIPTS / "ffi_round_trip.py"), str(library)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    got["findings"] = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    return got


def test_an_ffi_handler_runs_on_the_newer_engine_build_as_on_the_cpu(handler_library):
    got = _round_trip(handler_library, "lammps-jax-pjrt-cpu")
    assert "pjrt_c_api_cpu_plugin.so" in got["platform_version"], got["platform_version"]
    assert isinstance(got["neuron"], list), got["neuron"]
    x = np.linspace(-2.0, 3.0, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(np.asarray(got["cpu"]), np.sin(x) * 2.0, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(got["neuron"], np.float32), np.asarray(got["cpu"], np.float32))
    # The compatibility analysis: a NeuronCore has no such handler.
    calls = [f for f in got["findings"] if f["check"] == "ffi-call"]
    assert calls and calls[0]["fails_on_trainium"] is True, got["findings"]
    assert "pjrt_c_api_cpu_plugin.so" in calls[0]["engine"], calls[0]
    assert calls[0]["source_file"].endswith("ffi_round_trip.py"), calls[0]
    assert [f["check"] for f in got["findings"]] == ["ffi-call"], got["findings"]  # sin, *, - are fine


def test_the_older_engine_build_names_the_build_that_runs_handlers(handler_library):
    got = _round_trip(handler_library, "xla-cpu-pjrt")
    assert isinstance(got["cpu"], list)
    assert isinstance(got["neuron"], dict), got["neuron"]
    message = got["neuron"]["message"]
    assert "No FFI handler registered for pjrt_neuron_test_twice_plus_one" in message, message
    assert "xla_cpu_pjrt.so does not run FFI handlers" in message and "PJRT_NEURON_SIM_ENGINE=lammps-jax-pjrt-cpu" in message


class _Args(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("target_name", ctypes.c_char_p),
                ("target_name_size", ctypes.c_size_t), ("handler", ctypes.c_void_p),
                ("platform_name", ctypes.c_char_p), ("platform_name_size", ctypes.c_size_t),
                ("traits", ctypes.c_uint32)]


def _ffi_extension(plugin_api) -> int:
    extension = plugin_api.raw.extension_start
    while extension:
        size, kind, following = (ctypes.c_size_t.from_address(extension).value,
                                 ctypes.c_int.from_address(extension + 8).value,
                                 ctypes.c_void_p.from_address(extension + 16).value)
        if kind == 5:  # PJRT_Extension_Type_FFI
            assert size == 48  # base, type_id_register, user_data_add, register_handler
            return extension
        extension = following
    pytest.fail("the plugin offers no FFI extension")


def _call(plugin_api, slot: int, args) -> "pjrt_capi.PjrtError | None":
    address = ctypes.c_void_p.from_address(_ffi_extension(plugin_api) + 24 + 8 * slot).value
    error = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(address)(ctypes.addressof(args) if args is not None else None)
    return plugin_api.error_from_ptr(error) if error else None


@pytest.mark.parametrize("change, code, words", [
    (dict(handler=None), "INVALID_ARGUMENT", "`handler` is null"),
    (dict(target_name=b"", target_name_size=0), "INVALID_ARGUMENT", "`target_name` is empty"),
    (dict(platform_name=b"CUDA", platform_name_size=4), "INVALID_ARGUMENT", "platform 'CUDA' is not this plugin's"),
    (dict(platform_name=None), "INVALID_ARGUMENT", "`platform_name` is null"),
    (dict(struct_size=16), "INVALID_ARGUMENT", "PJRT_FFI_Register_Handler_Args"),
])
def test_bad_handler_registrations_fail_naming_the_function(plugin_api, change, code, words):
    args = _Args(ctypes.sizeof(_Args), b"t", 1, 0x1000, b"neuron", 6, 0)
    for name, value in change.items():
        setattr(args, name, value)
    error = _call(plugin_api, 2, args)
    assert error is not None
    assert error.code_name == code and "PJRT_FFI_Register_Handler" in str(error) and words in str(error), str(error)


def test_a_null_args_struct_and_the_unforwarded_entries_fail_naming_the_function(plugin_api):
    error = _call(plugin_api, 2, None)
    assert error is not None and "PJRT_FFI_Register_Handler" in str(error)
    for slot, name in ((0, "PJRT_FFI_TypeID_Register"), (1, "PJRT_FFI_UserData_Add")):
        error = _call(plugin_api, slot, _Args(ctypes.sizeof(_Args)))
        assert error is not None and error.code_name == "UNIMPLEMENTED" and name in str(error), str(error)


def _linalg(engine: str) -> dict:
    if config.engine_builds()[engine] is None:
        pytest.fail(f"engine build {engine} is not installed (pip install '.[engine-jax]')")
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_NEURON_ENGINE_LIBRARY", "NEURON_RT_VISIBLE_CORES")}
    env.update(JAX_PLATFORMS="neuron,cpu", PJRT_NEURON_SIM_ENGINE=engine, TF_CPP_MIN_LOG_LEVEL="2",
               PJRT_NEURON_LOCK_DIR=tempfile.mkdtemp(prefix="pjrt-neuron-lapack-"), PJRT_NEURON_COMPAT="off")
    run = subprocess.run([sys.executable, str(SCRIPTS / "lapack_linalg.py")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_lapack_only_linear_algebra_runs_on_the_newer_engine_build_as_on_the_cpu():
    # JAX lowers eigh, eig and schur only for the CPU, to jaxlib's LAPACK handlers.
    got = _linalg("lammps-jax-pjrt-cpu")
    for name, result in got.items():
        assert isinstance(result["neuron"], list), (name, result["neuron"])
        np.testing.assert_allclose(np.asarray(result["neuron"]), np.asarray(result["cpu"]), rtol=1e-5, atol=1e-5,
                                   err_msg=name)


def test_lapack_only_linear_algebra_on_the_older_build_names_the_build_that_runs_it():
    got = _linalg("xla-cpu-pjrt")
    for name, result in got.items():
        assert isinstance(result["cpu"], list), (name, result["cpu"])
        error = result["neuron"]
        assert isinstance(error, dict), (name, error)
        assert "No FFI handler registered for lapack_" in error["message"], (name, error)
        assert "lammps-jax-pjrt-cpu" in error["message"], (name, error)
