"""The Trainium engine (PJRT_NEURON_ENGINE=neuron) end to end, on the Neuron stand-in
(tests/neuron_standin: libnrt.so.1 and neuronx-cc written from the same contract).

C API checks run in this process, each client with the stand-in's settings of its own (they
are read when a client is made); JAX and torch-xla run in subprocesses, once per engine, and
their numbers must agree with the simulator's.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

import pjrt_capi as P
import pjrt_neuron
import programs

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "tests" / "neuron_engine_scripts"
CONVERTER = f"'{sys.executable}' '{REPO / 'pjrt_neuron' / '_neuron_mlir_to_hlo.py'}'"
A = np.arange(6, dtype=np.float32).reshape(2, 3)
TIMEOUT = 600


def standin_env(standin, lock_dir, **extra) -> dict:
    env = {
        **standin.environment(lock_dir),
        "PJRT_NEURON_ENGINE": "neuron",
        "PJRT_NEURON_NRT_LIBRARY": str(standin.libnrt),
        "PJRT_NEURON_MLIR_CONVERTER": CONVERTER,
        "PJRT_NEURON_COMPILE_PROGRESS_SECONDS": "0",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture
def neuron(standin, plugin_api, monkeypatch, tmp_path):
    """make(**settings) -> a client on the neuron engine, closed after the test."""
    clients = []

    def make(**settings):
        for key, value in standin_env(standin, tmp_path / "nrt-locks", **settings).items():
            monkeypatch.setenv(key, value)
        (tmp_path / "nrt-locks").mkdir(exist_ok=True)
        clients.append(P.Client(plugin_api))
        return clients[-1]

    yield make
    for c in clients:
        c.close()


def unique(program: str, tag: str) -> str:
    """The program with a comment of its own: a cache key no other test shares."""
    return f"// {tag}\n{program}"


def pjrt_error(call) -> P.PjrtError:
    with pytest.raises(P.PjrtError) as raised:
        call()
    return raised.value


# ---------------------------------------------------------------- programs and buffers


def test_platform_version_names_the_compiler(neuron):
    client = neuron()
    assert "neuronx-cc" in client.platform_version and "--target=trn1" in client.platform_version


def test_compile_execute_matches_numpy(neuron):
    client = neuron()
    (out,) = client.compile(programs.DOUBLE).execute([client.buffer_from_numpy(A)])
    np.testing.assert_array_equal(out[0].to_numpy(), A + A)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32", "int8", "uint8", "bool", "int64"])
def test_buffer_round_trip(neuron, dtype):
    client = neuron()
    import ml_dtypes  # noqa: F401 - numpy's bfloat16
    values = (np.arange(24) % 7 - 3).reshape(2, 3, 4).astype(dtype)
    buffer = client.buffer_from_numpy(values, device=client.addressable_devices()[1])
    np.testing.assert_array_equal(buffer.to_numpy(), values)
    other = buffer.copy_to_device(client.addressable_devices()[0])
    np.testing.assert_array_equal(other.to_numpy(), values)


def test_strided_and_zero_element_arrays(neuron):
    client = neuron()
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[:, ::2]
    buffer = client.buffer_from_numpy(view, byte_strides=view.strides)
    np.testing.assert_array_equal(buffer.to_numpy(), view)
    empty = client.buffer_from_numpy(np.zeros((0, 3), np.float32))  # the runtime refuses 0-byte tensors
    assert empty.to_numpy().shape == (0, 3)


def test_donated_input_is_gone_and_kept_one_stays(neuron):
    client = neuron()
    executable = client.compile(programs.DONATING)
    x = client.buffer_from_numpy(A)
    (out,) = executable.execute([x])
    np.testing.assert_array_equal(out[0].to_numpy(), A + A)
    assert x.is_deleted
    y = client.buffer_from_numpy(A)
    (out,) = executable.execute([y], non_donatable=[0])
    np.testing.assert_array_equal(out[0].to_numpy(), A + A)
    np.testing.assert_array_equal(y.to_numpy(), A)


def test_collective_over_two_cores(neuron):
    client = neuron()
    executable = client.compile(programs.ALL_REDUCE, compile_options=P.compile_options_proto(num_replicas=2))
    devices = client.addressable_devices()
    x = np.array([1, 2], np.float32)
    outs = executable.execute([[client.buffer_from_numpy(x, device=devices[0])],
                               [client.buffer_from_numpy(x * 10, device=devices[1])]])
    for row in outs:
        np.testing.assert_array_equal(row[0].to_numpy(), x * 11)


def test_serialized_executable_carries_the_neff(neuron):
    client = neuron()
    data = client.compile(unique(programs.DOUBLE, "serialize")).get_executable().serialize()
    assert b"pjrt-neuron-neff/1" in data
    (out,) = client.deserialize_and_load(data).execute([client.buffer_from_numpy(A)])
    np.testing.assert_array_equal(out[0].to_numpy(), A + A)


def test_neff_that_does_not_match_its_program_names_the_tensor(neuron):
    client = neuron()
    data = client.compile(unique(programs.DOUBLE, "binding")).get_executable().serialize()
    # The signature says f32[2,3] (dims 2, 3 as fields 2); make it f32[2,4].
    old = bytes([0x08, 11, 0x10, 2, 0x10, 3])
    assert data.count(old) == 2  # the parameter and the result
    tampered = client.deserialize_and_load(data.replace(old, bytes([0x08, 11, 0x10, 2, 0x10, 4]), 1))
    x = client.buffer_from_numpy(np.zeros((2, 4), np.float32))
    error = pjrt_error(lambda: tampered.execute([x]))  # models are loaded and bound at the first run
    assert error.code in (P.ErrorCode.INTERNAL, P.ErrorCode.INVALID_ARGUMENT), error
    assert "'input0' holds 24 bytes" in error.message, error.message


# ---------------------------------------------------------------- runtime statuses


@pytest.mark.parametrize("status,code,name", [
    (4, "RESOURCE_EXHAUSTED", "NRT_RESOURCE (4)"),
    (5, "DEADLINE_EXCEEDED", "NRT_TIMEOUT (5)"),
    (7, "UNAVAILABLE", "NRT_QUEUE_FULL (7)"),
    (1002, "INVALID_ARGUMENT", "NRT_EXEC_BAD_INPUT (1002)"),
    (1006, "OUT_OF_RANGE", "NRT_EXEC_OOB (1006)"),
    (1201, "INTERNAL", "NRT_EXEC_HW_ERR_HBM_UE (1201)"),
    (1202, "INTERNAL", "NRT_EXEC_HW_ERR_NC_UE (1202)"),
])
def test_execute_status_maps_to_pjrt_code(neuron, status, code, name):
    client = neuron(NEURON_STANDIN_FAULT=f"nrt_execute:1:{status}")
    executable = client.compile(programs.DOUBLE)
    error = pjrt_error(lambda: executable.execute([client.buffer_from_numpy(A)]))
    assert error.code == P.ErrorCode[code], error
    assert f"nrt_execute on NeuronCore 0 failed: {name}" in error.message, error.message


def test_fault_mid_execution_leaves_the_process_usable(neuron):
    client = neuron(NEURON_STANDIN_FAULT="nrt_execute:2:1203")
    executable = client.compile(programs.DOUBLE)
    x = client.buffer_from_numpy(A)
    executable.execute([x])
    error = pjrt_error(lambda: executable.execute([x]))
    assert "NRT_EXEC_HW_ERR_DMA_ABORT (1203)" in error.message
    (out,) = executable.execute([x])  # the next run, and the input, are fine
    np.testing.assert_array_equal(out[0].to_numpy(), A + A)


def test_real_timeout_is_deadline_exceeded(neuron):
    client = neuron(NEURON_STANDIN_EXEC_DELAY_MS=3000, NEURON_RT_EXEC_TIMEOUT=1)
    executable = client.compile(programs.DOUBLE)
    error = pjrt_error(lambda: executable.execute([client.buffer_from_numpy(A)]))
    assert error.code == P.ErrorCode.DEADLINE_EXCEEDED, error


def test_hbm_full_is_resource_exhausted_naming_core_and_size(neuron):
    client = neuron(NEURON_STANDIN_HBM_BYTES=1 << 20)
    big = np.zeros((512, 1024), np.float32)  # 2 MiB
    error = pjrt_error(lambda: client.buffer_from_numpy(big, device=client.addressable_devices()[1]))
    assert error.code == P.ErrorCode.RESOURCE_EXHAUSTED, error
    assert "nrt_tensor_allocate on NeuronCore 1 failed: NRT_RESOURCE (4)" in error.message
    assert "2097152 bytes" in error.message


@pytest.mark.parametrize("status,code,name", [
    (10, "FAILED_PRECONDITION", "NRT_UNSUPPORTED_NEFF_VERSION (10)"),
    (9, "RESOURCE_EXHAUSTED", "NRT_LOAD_NOT_ENOUGH_NC (9)"),
    (4, "RESOURCE_EXHAUSTED", "NRT_RESOURCE (4)"),
])
def test_load_status_maps_to_pjrt_code_and_a_retry_loads(neuron, status, code, name):
    client = neuron(NEURON_STANDIN_FAULT=f"nrt_load:1:{status}")
    executable = client.compile(programs.DOUBLE)
    x = client.buffer_from_numpy(A)
    error = pjrt_error(lambda: executable.execute([x]))
    assert error.code == P.ErrorCode[code], error
    assert f"nrt_load on NeuronCore 0 failed: {name}" in error.message, error.message
    (out,) = executable.execute([x])
    np.testing.assert_array_equal(out[0].to_numpy(), A + A)


def test_numerical_errors_are_results_not_failures(neuron, capfd):
    client = neuron(NEURON_STANDIN_NUMERICAL_ERRORS=1)
    executable = client.compile(programs.DOUBLE)
    x = A.copy()
    x[0, 0] = np.inf
    (out,) = executable.execute([client.buffer_from_numpy(x)])
    assert np.isinf(out[0].to_numpy()[0, 0])
    assert "NRT_EXEC_COMPLETED_WITH_NUM_ERR" in capfd.readouterr().err


# ---------------------------------------------------------------- the compiler


def test_compiler_failure_carries_errors_code_and_log(neuron):
    client = neuron(NEURON_STANDIN_CC_FAIL="NCC_EUOC002:the stand-in refuses this")
    error = pjrt_error(lambda: client.compile(unique(programs.DOUBLE, "cc-fail")))
    assert error.code == P.ErrorCode.INVALID_ARGUMENT, error
    assert "NCC_EUOC002" in error.message and "the stand-in refuses this" in error.message
    log = error.message.split("full log: ")[1].split()[0]
    assert os.path.isfile(log)


def test_compiler_hbm_codes_are_resource_exhausted(neuron):
    client = neuron(NEURON_STANDIN_CC_FAIL="NCC_EOOM001:model too large")
    error = pjrt_error(lambda: client.compile(unique(programs.DOUBLE, "cc-oom")))
    assert error.code == P.ErrorCode.RESOURCE_EXHAUSTED, error


def test_compiler_killed_by_sigkill_is_resource_exhausted(neuron):
    client = neuron(NEURON_STANDIN_CC_SIGNAL=9)
    error = pjrt_error(lambda: client.compile(unique(programs.DOUBLE, "cc-kill")))
    assert error.code == P.ErrorCode.RESOURCE_EXHAUSTED and "signal 9" in error.message, error


def test_compiler_rejects_float64(neuron):
    f64 = """func.func @main(%a: tensor<2xf64>) -> tensor<2xf64> {
      %0 = stablehlo.add %a, %a : tensor<2xf64>
      return %0 : tensor<2xf64>
    }"""
    client = neuron()
    error = pjrt_error(lambda: client.compile(f64))
    assert error.code == P.ErrorCode.INVALID_ARGUMENT and "NCC_EUOC002" in error.message, error


def test_stablehlo_that_does_not_convert_is_invalid_argument(neuron):
    client = neuron()
    error = pjrt_error(lambda: client.compile("func.func @main( this is not MLIR"))
    assert error.code == P.ErrorCode.INVALID_ARGUMENT, error


def test_program_of_two_partitions_runs_a_partition_per_core(neuron):
    # Not for the partitioner (no use_spmd_partitioning): each partition is a rank as it is,
    # and its partition id the rank's.
    client = neuron()
    executable = client.compile(programs.PER_PARTITION, compile_options=P.compile_options_proto(num_partitions=2))
    devices = client.addressable_devices()
    x = np.array([1, 2], np.float32)
    outs = executable.execute([[client.buffer_from_numpy(x, device=devices[0])],
                               [client.buffer_from_numpy(x, device=devices[1])]])
    for partition, row in enumerate(outs):
        np.testing.assert_array_equal(row[0].to_numpy(), x + partition)


def test_replica_id_in_a_program_of_partitions_is_unimplemented_naming_it(neuron):
    client = neuron()
    error = pjrt_error(lambda: client.compile(
        programs.PER_REPLICA, compile_options=P.compile_options_proto(num_partitions=2)))
    assert error.code == P.ErrorCode.UNIMPLEMENTED, error
    assert "replica id in a program of several partitions" in error.message and "replica-id" in error.message, error


# ---------------------------------------------------------------- engine choice and processes


def test_auto_never_picks_the_stand_in(neuron):
    client = neuron(PJRT_NEURON_ENGINE="auto")
    assert "XLA CPU" in client.platform_version, client.platform_version


@pytest.mark.parametrize("setting,value,named", [
    ("PJRT_NEURON_NEURONX_CC", "/nonexistent/neuronx-cc", "/nonexistent/neuronx-cc"),
    ("PJRT_NEURON_NRT_LIBRARY", "/nonexistent/libnrt.so.1", "/nonexistent/libnrt.so.1"),
])
def test_neuron_where_it_cannot_work_is_failed_precondition(neuron, setting, value, named):
    error = pjrt_error(lambda: neuron(**{setting: value}))
    assert error.code == P.ErrorCode.FAILED_PRECONDITION and named in error.message, error


def test_unknown_engine_choice_is_refused(neuron):
    error = pjrt_error(lambda: neuron(PJRT_NEURON_ENGINE="gpu"))
    assert error.code == P.ErrorCode.INVALID_ARGUMENT and "PJRT_NEURON_ENGINE='gpu'" in error.message


CLAIM = """
import sys; sys.path.insert(0, {tests!r})
import pjrt_capi as P
try:
    P.Client(P.Api({lib!r})).close(); print("CLAIMED")
except P.PjrtError as e:
    print("REFUSED", e.code_name, e.message)
"""


def test_client_destroy_releases_the_cores(neuron, tmp_path):
    client = neuron()
    env = dict(os.environ, PJRT_NEURON_LOCK_DIR=str(tmp_path / "other-plugin-locks"))  # only the runtime's locks
    script = CLAIM.format(tests=str(REPO / "tests"), lib=pjrt_neuron.library_path())

    def other_process():
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=TIMEOUT)
        return run.stdout.strip().splitlines()[-1]

    held = other_process()
    assert held.startswith("REFUSED RESOURCE_EXHAUSTED") and "nrt_init" in held, held
    client.close()
    assert other_process() == "CLAIMED"


def _has_tag(pid: str, tag: str) -> bool:
    try:
        return f"PJRT_NEURON_TEST_TAG={tag}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False  # gone already


def test_progress_then_ctrl_c_ends_the_compiler(standin, tmp_path):
    # A lock directory of its own: this pytest process may hold the plugin's NeuronCores.
    tag = f"ctrl-c-{os.getpid()}-{time.time()}"
    env = dict(os.environ, **standin_env(standin, tmp_path, NEURON_STANDIN_CC_DELAY=120,
                                         PJRT_NEURON_COMPILE_PROGRESS_SECONDS=0.5),
               PJRT_NEURON_LOCK_DIR=str(tmp_path / "plugin-locks"), PJRT_NEURON_TEST_TAG=tag)
    # A shell's background job starts with SIGINT ignored, and Python keeps that; a terminal's
    # Python has its KeyboardInterrupt handler, which is what Ctrl-C reaches.
    script = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
              f"import sys; sys.path.insert(0, {str(REPO / 'tests')!r}); import pjrt_capi as P, pjrt_neuron, programs\n"
              f"c = P.Client(P.Api(pjrt_neuron.library_path()))\n"
              f"c.compile('// ctrl-c {time.time()}\\n' + programs.DOUBLE)\n")
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE, text=True)
    seen = ""
    deadline = time.time() + 60
    while "neuronx-cc is compiling" not in seen and time.time() < deadline:
        seen += child.stderr.readline()
    assert "neuronx-cc is compiling" in seen, seen
    running = subprocess.run(["pgrep", "-f", "neuronx_cc.py"], capture_output=True, text=True).stdout.split()
    assert any(_has_tag(pid, tag) for pid in running), running  # the filter below sees this test's compiler
    started = time.time()
    child.send_signal(signal.SIGINT)
    rest = child.communicate(timeout=60)[1]
    assert child.returncode != 0
    assert time.time() - started < 20
    assert "KeyboardInterrupt" in rest or "CANCELLED" in rest, rest[-2000:]
    # Only this test's compilers (its tag is in their environment): other tests may compile now.
    left = [pid for pid in subprocess.run(["pgrep", "-f", "neuronx_cc.py"], capture_output=True,
                                          text=True).stdout.split() if _has_tag(pid, tag)]
    assert not left, f"compiler processes left: {left}"


# ---------------------------------------------------------------- frameworks, against the simulator


def run_script(argv, env) -> dict:
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT, cwd=REPO)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def framework_env(standin, tmp_path, engine, **settings) -> dict:
    scrubbed = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "PJRT_DEVICE")}
    env = dict(scrubbed, PJRT_NEURON_LOCK_DIR=tempfile.mkdtemp(prefix="pjrt-neuron-locks-"),
               NEURON_COMPILE_CACHE_URL=str(tmp_path / f"cache-{engine}"), TF_CPP_MIN_LOG_LEVEL="2", **settings)
    if engine == "neuron":
        env.update(standin_env(standin, tmp_path / "nrt-locks"))
        (tmp_path / "nrt-locks").mkdir(exist_ok=True)
    else:
        env["PJRT_NEURON_ENGINE"] = "sim"
    return env


def test_jax_programs_match_the_simulator(standin, tmp_path):
    argv = [sys.executable, str(SCRIPTS / "jax_programs.py")]
    neuron = run_script(argv, framework_env(standin, tmp_path, "neuron", JAX_PLATFORMS="neuron"))
    sim = run_script(argv, framework_env(standin, tmp_path, "sim", JAX_PLATFORMS="neuron"))
    assert "neuronx-cc" in neuron["platform_version"] and "XLA CPU" in sim["platform_version"]
    # JAX 0.10 gives pmap, sharded jit and shard_map several partitions: XLA's partitioner
    # splits them and each partition runs as a rank of the Neuron runtime's collectives.
    for name in ("add", "matmul", "two_results", "pass_through", "donated", "second_core", "pmap_psum",
                 "sharded_jit", "spmd_contracted_matmul", "spmd_total", "spmd_reshard", "spmd_axis_index",
                 "shard_map_collectives", "spmd_training_steps"):
        assert not isinstance(neuron[name], dict), (name, neuron[name])
        assert not isinstance(sim[name], dict), (name, sim[name])
        # spmd_total sums tanh of symmetric data to about 0: the engines' summation orders differ
        # by float32 rounding of its terms (~1e-6 on the newer build), not by a wrong term.
        np.testing.assert_allclose(neuron[name], sim[name], rtol=1e-6, atol=1e-5 if name == "spmd_total" else 1e-7,
                                   err_msg=name)
    np.testing.assert_array_equal(neuron["add"], A + A)
    np.testing.assert_array_equal(neuron["pmap_psum"], np.stack([A * 11, A * 11]))


def test_torch_xla_mlp_steps_match_the_simulator(standin, tmp_path):
    pytest.importorskip("torch_xla")
    argv = [sys.executable, str(REPO / "tests" / "torch_scripts" / "train_mlp.py")]
    neuron = run_script(argv, framework_env(standin, tmp_path, "neuron", PJRT_DEVICE="NEURON"))
    sim = run_script(argv, framework_env(standin, tmp_path, "sim", PJRT_DEVICE="NEURON"))
    for optimizer in ("sgd", "adam"):
        assert neuron[optimizer] == pytest.approx(sim[optimizer], abs=1e-6), optimizer
        assert neuron[optimizer][-1] < neuron[optimizer][0]


def test_torch_xla_spmd_steps_match_the_simulator(standin, tmp_path):
    # Sharded inputs and weights (data-, model- and weight-sharded runs) on the stand-in's two
    # cores: XLA's partitioner splits each step, the ranks meet in the runtime's collectives.
    pytest.importorskip("torch_xla")
    argv = [sys.executable, str(REPO / "tests" / "spmd_scripts" / "torch_spmd.py"), "spmd"]
    neuron = run_script(argv, framework_env(standin, tmp_path, "neuron", PJRT_DEVICE="NEURON"))
    sim = run_script(argv, framework_env(standin, tmp_path, "sim", PJRT_DEVICE="NEURON"))
    assert (neuron["device_count"], neuron["is_spmd"]) == (sim["device_count"], True) == (2, True)
    for run in ("data_parallel", "model_parallel", "weight_sharded"):
        got, want = neuron["runs"][run], sim["runs"][run]
        assert got["losses"] == pytest.approx(want["losses"], abs=1e-6), run
        for w in ("fc1_weight", "fc2_weight"):
            np.testing.assert_allclose(got[w], want[w], rtol=0, atol=1e-6, err_msg=f"{run} {w}")
        assert got["specs"] == want["specs"], run
        assert got["losses"][-1] < got["losses"][0], run


def run_example(argv, env) -> tuple[list[str], str]:
    """The example's printed epoch losses (4 decimals, as it prints them) and test accuracy."""
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT, cwd=REPO)
    assert run.returncode == 0, run.stderr[-4000:]
    losses = re.findall(r"^epoch \d+/\d+  loss (\S+)$", run.stdout, re.M)
    accuracy = re.findall(r"^test accuracy: (\S+)$", run.stdout, re.M)
    assert losses and accuracy, run.stdout[-2000:]
    return losses, accuracy[0]


@pytest.mark.parametrize("example, framework", [("train_digits_torch.py", {"PJRT_DEVICE": "NEURON"}),
                                                ("train_digits_jax.py", {"JAX_PLATFORMS": "neuron"})])
def test_digits_examples_train_as_on_the_simulator(standin, tmp_path, example, framework):
    if "PJRT_DEVICE" in framework:
        pytest.importorskip("torch_xla")
    argv = [sys.executable, str(REPO / "examples" / example)]
    neuron = run_example(argv, framework_env(standin, tmp_path, "neuron", **framework))
    sim = run_example(argv, framework_env(standin, tmp_path, "sim", **framework))
    assert neuron == sim
    assert float(neuron[0][-1]) < float(neuron[0][0])


# ---------------------------------------------------------------- the transfer manager


def test_transfer_manager_uploads_in_chunks_to_buffers_retrieved_first(neuron, plugin_api):
    from test_capi_transfer_manager import ARRAYS, _bulk_upload

    client = neuron()
    got, sizes, device, _ = _bulk_upload(plugin_api, client)
    assert sizes == [a.nbytes for a in ARRAYS] and device == client.devices()[0].ptr
    for g, a in zip(got, ARRAYS):
        assert g.dtype == a.dtype and g.shape == a.shape
        np.testing.assert_array_equal(g, a)


def test_transfer_manager_buffer_is_refused_until_its_last_part_then_runs(neuron, plugin_api):
    from test_capi_transfer_manager import Manager

    client = neuron()
    m = Manager(plugin_api, client, [A])
    buffer = m.retrieve(0)
    raw = A.tobytes()
    m.transfer(0, raw[:8], 0, False)
    assert not buffer.ready_event().is_ready
    executable = client.compile(programs.DOUBLE)
    error = pjrt_error(lambda: executable.execute([buffer]))
    assert error.code == P.ErrorCode.FAILED_PRECONDITION and "still being filled by a transfer manager" in error.message
    m.transfer(0, raw[8:], 8, True)
    buffer.ready_event().await_()
    (out,) = executable.execute([buffer])
    np.testing.assert_array_equal(out[0].to_numpy(), A + A)
    m.destroy()


def test_transfer_manager_errors_and_pinned_host_memory(neuron, plugin_api):
    from test_capi_transfer_manager import Manager

    client = neuron()
    device = client.devices()[1]
    before = device.memory_stats()["bytes_in_use"]
    pinned = [mem for mem in device.addressable_memories if mem.kind == "pinned_host"][0]
    m = Manager(plugin_api, client, [A, A], memory=pinned)
    assert device.memory_stats()["bytes_in_use"] == before  # host memory: no HBM
    failed, good = m.retrieve(0), m.retrieve(1)
    message = b"upload source went away"
    m.call("SetBufferError", buffer_index=0, error_code=P.ErrorCode.DATA_LOSS,
           error_message=ctypes.c_char_p(message), error_message_size=len(message))
    m.upload(1, A)
    error = pjrt_error(failed.to_numpy)
    assert error.code == P.ErrorCode.DATA_LOSS and "upload source went away" in error.message
    assert good.memory.kind == "pinned_host" and good.device.id == 1
    np.testing.assert_array_equal(good.to_numpy(), A)
    m.destroy()
