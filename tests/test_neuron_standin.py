"""The libnrt.so.1 / neuronx-cc stand-in, driven directly against the contract.

ctypes on the stand-in's libnrt.so.1 and subprocesses of its neuronx-cc; no plugin code. Each
test gets a simulated host of its own (a fresh lock directory); libnrt's state is per process,
so every test that initialises it closes it again.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from neuron_standin import build as standin_build
from neuron_standin import neff as neff_format
from neuron_standin import nrt_ctypes as N

STANDIN_DIR = Path(standin_build.SOURCE_DIR)

_ENV_VARS = [
    "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURON_LOGICAL_NC_CONFIG",
    "NEURON_RT_ROOT_COMM_ID", "NEURON_RT_EXEC_TIMEOUT", "NEURON_RT_LOG_LEVEL",
    "NEURON_STANDIN_INSTANCE", "NEURON_STANDIN_CORES", "NEURON_STANDIN_HBM_BYTES",
    "NEURON_STANDIN_FAULT", "NEURON_STANDIN_EXEC_DELAY_MS", "NEURON_STANDIN_NUMERICAL_ERRORS",
    "NEURON_STANDIN_CC_DELAY", "NEURON_STANDIN_CC_SIGNAL", "NEURON_STANDIN_CC_FAIL",
]


# --------------------------------------------------------------------------
# Programs: JAX's HLO with the neff names an engine would add, or HLO text
# --------------------------------------------------------------------------

def _hlo_module(text: str) -> bytes:
    import jaxlib._hlo as xla_hlo

    return xla_hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()


def _name_entry_tensors(hlo_text: str, output_count: int) -> bytes:
    """Adds neff_input_names to each ENTRY parameter and neff_output_names to its ROOT."""
    named, in_entry = [], False
    for line in hlo_text.splitlines():
        if line.startswith("ENTRY"):
            in_entry = True
        elif in_entry and line.strip() == "}":
            in_entry = False
        elif in_entry:
            parameter = re.search(r"\bparameter\((\d+)\)", line)
            if parameter:
                line += f', frontend_attributes={{neff_input_names="input{parameter[1]}"}}'
            elif line.lstrip().startswith("ROOT "):
                names = ",".join(f"output{i}" for i in range(output_count))
                line += f', frontend_attributes={{neff_output_names="{names}"}}'
        named.append(line)
    return _hlo_module("\n".join(named))


def _jax_program(function, *shapes) -> bytes:
    import jax

    specs = [jax.ShapeDtypeStruct(shape, np.float32) for shape in shapes]
    lowered = jax.jit(function).trace(*specs).lower(lowering_platforms=("cpu",))
    outputs = len(jax.tree_util.tree_leaves(lowered.out_info))
    return _name_entry_tensors(lowered.compiler_ir("hlo").as_hlo_text(), outputs)


ALL_REDUCE_HLO = """HloModule all_reduce
sum {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0), frontend_attributes={neff_input_names="input0"}
  ROOT r = f32[4] all-reduce(p), replica_groups={}, to_apply=sum, frontend_attributes={neff_output_names="output0"}
}"""

DONATED_HLO = """HloModule donated, input_output_alias={ {0}: (0, {}, may-alias) }
ENTRY e {
  p = f32[4] parameter(0), frontend_attributes={neff_input_names="input0"}
  q = f32[4] parameter(1), frontend_attributes={neff_input_names="input1"}
  s = f32[4] add(p, q)
  d = f32[4] add(q, q)
  ROOT t = (f32[4], f32[4]) tuple(s, d), frontend_attributes={neff_output_names="output0,output1"}
}"""

MIXED_TYPES_HLO = """HloModule mixed
ENTRY e {
  p = s32[3] parameter(0), frontend_attributes={neff_input_names="input0"}
  z = s32[3] constant({0, 0, 0})
  c = pred[3] compare(p, z), direction=GT
  b = bf16[3] convert(p)
  e = f32[0] constant({})
  ROOT t = (pred[3], bf16[3], f32[0]) tuple(c, b, e), frontend_attributes={neff_output_names="output0,output1,output2"}
}"""

REJECTED_PROGRAMS = {
    "float64": ("""HloModule double_negate
ENTRY e {
  p = f64[4] parameter(0), frontend_attributes={neff_input_names="input0"}
  ROOT n = f64[4] negate(p), frontend_attributes={neff_output_names="output0"}
}""", "NCC_EUOC002"),
    "complex": ("""HloModule complex_convert
ENTRY e {
  p = f32[4] parameter(0), frontend_attributes={neff_input_names="input0"}
  c = c64[4] convert(p)
  ROOT r = f32[4] real(c), frontend_attributes={neff_output_names="output0"}
}""", "NCC_EVRF004"),
    "integer_dot": ("""HloModule idot
ENTRY e {
  p = s32[2,2] parameter(0), frontend_attributes={neff_input_names="input0"}
  ROOT d = s32[2,2] dot(p, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}, frontend_attributes={neff_output_names="output0"}
}""", "NCC_EUOC002"),
    "host_callback": ("""HloModule callback
ENTRY e {
  p = f32[4] parameter(0), frontend_attributes={neff_input_names="input0"}
  ROOT c = f32[4] custom-call(p), custom_call_target="xla_ffi_python_cpu_callback", frontend_attributes={neff_output_names="output0"}
}""", "NCC_EUOC002"),
    "unnamed_parameters": ("""HloModule unnamed
ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p), frontend_attributes={neff_output_names="output0"}
}""", "NCC_ESTD002"),
    "pass_through_output": ("""HloModule pass
ENTRY e {
  p = f32[4] parameter(0), frontend_attributes={neff_input_names="input0"}
  n = f32[4] negate(p)
  ROOT t = (f32[4], f32[4]) tuple(n, p), frontend_attributes={neff_output_names="output0,output1"}
}""", "NCC_ESTD003"),
}


# --------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------

@pytest.fixture(scope="session")
def standin():
    return standin_build.build()


@pytest.fixture(scope="session")
def nrt_library(standin):
    return N.Nrt(standin.libnrt)


@pytest.fixture
def host(monkeypatch, tmp_path, standin):
    """A simulated trn1.2xlarge of this test's own; tests change it through the environment."""
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in standin.environment(tmp_path / "locks").items():
        monkeypatch.setenv(name, value)
    return monkeypatch


@pytest.fixture
def nrt(host, nrt_library):
    yield nrt_library
    nrt_library.nrt_close()  # a no-op (with a warning) when the test closed it already


def _compile(standin, program: bytes, directory: Path, *flags: str, target: str = "trn1",
             env: dict | None = None) -> subprocess.CompletedProcess:
    source = directory / "model.hlo_module.pb"
    source.write_bytes(program)
    return subprocess.run(
        [str(standin.neuronx_cc), "compile", str(source), "--framework=XLA",
         f"--target={target}", "--output", str(directory / "model.neff"), *flags],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=60)


@pytest.fixture(scope="session")
def neffs(standin, tmp_path_factory):
    """NEFFs compiled once a session: name -> bytes."""
    programs = {
        "add": (_jax_program(lambda a, b: a + b, (4, 8), (4, 8)), "trn1"),
        "matmul": (_jax_program(lambda x, w: x @ w, (2, 3), (3, 4)), "trn1"),
        "sum_and_product": (_jax_program(lambda a, b: (a + b, a * b), (2, 3), (2, 3)), "trn1"),
        "all_reduce": (_hlo_module(ALL_REDUCE_HLO), "trn1"),
        "donated": (_hlo_module(DONATED_HLO), "trn1"),
        "mixed_types": (_hlo_module(MIXED_TYPES_HLO), "trn1"),
        "add_for_trn2": (_jax_program(lambda a, b: a + b, (4, 8), (4, 8)), "trn2"),
    }
    compiled = {}
    for name, (program, target) in programs.items():
        directory = tmp_path_factory.mktemp(name)
        result = _compile(standin, program, directory, target=target)
        assert result.returncode == 0, result.stdout + result.stderr
        compiled[name] = (directory / "model.neff").read_bytes()
    return compiled


class Bound:
    """A loaded model with device tensors bound by name, as an engine would bind them."""

    def __init__(self, nrt, model, vnc=0):
        self.nrt, self.model = nrt, model
        self.listed = nrt.tensor_info(model)
        self.tensors = {}
        self.inputs, self.outputs = nrt.tensor_set(), nrt.tensor_set()
        for t in self.listed:
            status, tensor = nrt.allocate(t.size, vnc=vnc, name=t.name.encode())
            assert status == N.SUCCESS
            self.tensors[t.name] = tensor
            assert nrt.add(self.inputs if t.usage == N.USAGE_INPUT else self.outputs,
                           t.name, tensor) == N.SUCCESS

    def write(self, name, array):
        assert self.nrt.write(self.tensors[name], np.ascontiguousarray(array).tobytes()) == 0

    def read(self, name, dtype, shape):
        t = next(t for t in self.listed if t.name == name)
        status, data = self.nrt.read(self.tensors[name], t.size)
        assert status == N.SUCCESS
        return np.frombuffer(data, dtype=dtype).reshape(shape)

    def execute(self):
        return self.nrt.nrt_execute(self.model, self.inputs, self.outputs)


def _loaded(nrt, neff, vnc=0):
    status, model = nrt.load(neff, vnc)
    assert status == N.SUCCESS
    return model


# --------------------------------------------------------------------------
# neuronx-cc
# --------------------------------------------------------------------------

def test_compiler_reports_its_version(standin):
    result = subprocess.run([str(standin.neuronx_cc), "--version"], capture_output=True,
                            text=True)
    assert result.returncode == 0
    assert result.stdout.startswith("NeuronX Compiler version ")


@pytest.mark.parametrize("change", [
    ["--bogus"], ["--framework=TENSORFLOW"], ["--target=trn3"], ["-O4"], ["--lnc", "2"],
    ["--auto-cast=sometimes"], ["--verbose=chatty"],
    "no --framework", "no --target", "no --output",
])
def test_compiler_command_line_is_checked(standin, tmp_path, change):
    args = [str(standin.neuronx_cc), "compile", str(tmp_path / "in.pb"), "--framework=XLA",
            "--target=trn1", "--output", str(tmp_path / "out.neff")]
    if isinstance(change, str):
        flag = change.split()[1]
        at = next(i for i, a in enumerate(args) if a.startswith(flag))
        del args[at:at + (2 if flag == "--output" else 1)]
    else:
        args += change
    result = subprocess.run(args, capture_output=True, text=True)
    assert result.returncode != 0
    assert "error:" in result.stderr
    assert not (tmp_path / "out.neff").exists()


def test_compiler_writes_the_tensor_table_from_the_names(standin, tmp_path):
    program = _jax_program(lambda x, w: (x @ w, x.sum()), (2, 3), (3, 4))
    result = _compile(standin, program, tmp_path, "-O1", "--model-type=transformer",
                      "--auto-cast=matmult", "--auto-cast-type=bf16", "--lnc", "1")
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[-1] == "Compiler status PASS"
    neff = neff_format.decode((tmp_path / "model.neff").read_bytes())
    assert (neff.target_family, neff.lnc) == (2, 1)
    assert neff.program == program
    table = [(t.name, t.usage, t.position, t.shape, t.byte_size, t.nrt_dtype) for t in neff.tensors]
    assert table == [("input0", 0, 0, [2, 3], 24, 10), ("input1", 0, 1, [3, 4], 48, 10),
                     ("output0", 1, 0, [2, 4], 32, 10), ("output1", 1, 1, [], 4, 10)]


def test_compiler_marks_donated_inputs_must_alias(neffs):
    neff = neff_format.decode(neffs["donated"])
    by_name = {t.name: t for t in neff.tensors}
    assert set(by_name) == {"input0.must_alias_input", "input1", "output0", "output1"}
    assert by_name["input0.must_alias_input"].alias_output == 0
    assert by_name["input1"].alias_output == neff_format.NO_ALIAS


def test_compiler_lnc_defaults_to_two_on_trn2(neffs):
    neff = neff_format.decode(neffs["add_for_trn2"])
    assert (neff.target_family, neff.lnc) == (5, 2)


@pytest.mark.parametrize("case", sorted(REJECTED_PROGRAMS))
def test_compiler_rejects_with_ncc_code(standin, tmp_path, case):
    text, code = REJECTED_PROGRAMS[case]
    result = _compile(standin, _hlo_module(text), tmp_path)
    assert result.returncode != 0
    errors = [line for line in result.stdout.splitlines() if " ERROR " in line]
    assert errors and all(re.search(r"ERROR \d+ \[neuronx-cc\]: \[NCC_[A-Z]+\d+\]", line)
                          for line in errors), errors
    assert any(f"[{code}]" in line for line in errors), errors
    assert result.stdout.splitlines()[-1] == "Compiler status ERROR"
    assert not (tmp_path / "model.neff").exists()


def test_compiler_rejects_input_that_is_not_hlo(standin, tmp_path):
    result = _compile(standin, b"\x08\x01garbage", tmp_path)
    assert result.returncode != 0
    assert "[NCC_ESTD001]" in result.stdout


def test_compiler_writes_its_log_file(standin, tmp_path):
    log = tmp_path / "compile.log"
    result = _compile(standin, _hlo_module(DONATED_HLO), tmp_path, "--logfile", str(log),
                      "--verbose", "info")
    assert result.returncode == 0
    text = log.read_text()
    assert "INFO" in text and text.rstrip().endswith("Compiler status PASS")


def test_compiler_fails_with_the_chosen_code(standin, tmp_path):
    result = _compile(standin, _hlo_module(DONATED_HLO), tmp_path,
                      env={"NEURON_STANDIN_CC_FAIL": "NCC_EOOM001:HBM too small"})
    assert result.returncode != 0
    assert "[NCC_EOOM001] HBM too small" in result.stdout
    assert not (tmp_path / "model.neff").exists()


def test_compiler_killed_by_a_signal_leaves_no_neff(standin, tmp_path):
    result = _compile(standin, _hlo_module(DONATED_HLO), tmp_path,
                      env={"NEURON_STANDIN_CC_SIGNAL": "9"})
    assert result.returncode == -signal.SIGKILL
    assert not (tmp_path / "model.neff").exists()


def test_compiler_slow_compile_shows_progress_and_finishes(standin, tmp_path):
    started = time.monotonic()
    result = _compile(standin, _hlo_module(DONATED_HLO), tmp_path,
                      env={"NEURON_STANDIN_CC_DELAY": "1.2"})
    assert time.monotonic() - started >= 1.2
    assert result.returncode == 0
    assert sum(line.startswith("Compiling...") for line in result.stdout.splitlines()) >= 2


def test_compiler_slow_compile_can_be_cancelled(standin, tmp_path):
    source = tmp_path / "model.hlo_module.pb"
    source.write_bytes(_hlo_module(DONATED_HLO))
    process = subprocess.Popen(
        [str(standin.neuronx_cc), "compile", str(source), "--framework=XLA", "--target=trn1",
         "--output", str(tmp_path / "model.neff")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "NEURON_STANDIN_CC_DELAY": "60"})
    assert process.stdout.readline().startswith("Compiling...")
    process.terminate()
    assert process.wait(timeout=10) == -signal.SIGTERM
    process.stdout.close()
    assert not (tmp_path / "model.neff").exists()


# --------------------------------------------------------------------------
# libnrt: the host, before and after nrt_init
# --------------------------------------------------------------------------

@pytest.mark.parametrize("instance, lnc, family, total", [
    ("trn1.2xlarge", None, 2, 2), ("trn1n.32xlarge", None, 3, 32), ("inf2.xlarge", None, 4, 2),
    ("trn2.48xlarge", None, 5, 64), ("trn2.48xlarge", "1", 5, 128),
])
def test_host_is_described_before_init(nrt, host, instance, lnc, family, total):
    host.setenv("NEURON_STANDIN_INSTANCE", instance)
    if lnc:
        host.setenv("NEURON_LOGICAL_NC_CONFIG", lnc)
    status, info = nrt.instance_info()
    assert (status, info.family) == (N.SUCCESS, family)
    assert nrt.total_count() == (N.SUCCESS, total)
    assert nrt.visible_count() == (N.SUCCESS, total)
    host.setenv("NEURON_RT_VISIBLE_CORES", "1")
    assert nrt.visible_count() == (N.SUCCESS, 1)


def test_version_and_status_strings(nrt):
    version = N.Version()
    assert nrt.nrt_get_version(ctypes.byref(version), ctypes.sizeof(version)) == N.SUCCESS
    assert version.rt_major == 2 and b"standin" in version.rt_detail
    assert b"RESOURCE" in nrt.nrt_get_status_as_str(N.RESOURCE)
    assert b"EXEC_BAD_INPUT" in nrt.nrt_get_status_as_str(N.EXEC_BAD_INPUT)


def test_calls_before_init_are_uninitialized_and_after_close_closed(host, standin, neffs, tmp_path):
    # A copy of its own: other tests (and the plugin's tests in this process) leave the shared
    # library's runtime closed, and dlopen of another file gives a runtime that was never started.
    private = tmp_path / "libnrt.so.1"
    private.write_bytes(Path(standin.libnrt).read_bytes())
    nrt = N.Nrt(private)

    def calls():
        tensor_set = ctypes.c_void_p()
        return [nrt.allocate(64)[0], nrt.load(neffs["add"])[0], nrt.memory_stats(0)[0],
                nrt.nrt_allocate_tensor_set(ctypes.byref(tensor_set))]

    assert calls() == [N.UNINITIALIZED] * 4
    assert nrt.init() == N.SUCCESS
    assert nrt.init() == N.INVALID  # once a process until nrt_close
    nrt.nrt_close()
    assert calls() == [N.CLOSED] * 4
    assert nrt.init() == N.SUCCESS  # a closed runtime may be initialised again
    nrt.nrt_close()


@pytest.mark.parametrize("variable, value", [
    ("NEURON_RT_VISIBLE_CORES", "0,2"), ("NEURON_RT_VISIBLE_CORES", "2"),
    ("NEURON_RT_VISIBLE_CORES", "a"), ("NEURON_RT_NUM_CORES", "3"),
    ("NEURON_STANDIN_INSTANCE", "trn9.huge"), ("NEURON_LOGICAL_NC_CONFIG", "2"),
    ("NEURON_STANDIN_FAULT", "nrt_exekute:1:4"), ("NEURON_STANDIN_FAULT", "nrt_execute:0:4"),
    ("NEURON_STANDIN_LOCK_DIR", ""), ("NEURON_STANDIN_XLA_CPU_PLUGIN", "/nonexistent.so"),
])
def test_bad_settings_fail_init_naming_the_variable(nrt, host, capfd, variable, value):
    host.setenv(variable, value)
    assert nrt.init() == N.INVALID
    assert variable in capfd.readouterr().err


def test_visible_cores_are_relative_and_exclusive_to_them(nrt, host, tmp_path):
    host.setenv("NEURON_STANDIN_INSTANCE", "trn1.32xlarge")
    host.setenv("NEURON_RT_VISIBLE_CORES", "3-4")
    assert nrt.init() == N.SUCCESS
    assert nrt.visible_count() == (N.SUCCESS, 2)
    assert nrt.allocate(64, vnc=1)[0] == N.SUCCESS
    assert nrt.allocate(64, vnc=2)[0] == N.INVALID  # the third visible core does not exist
    locks = sorted(p.name for p in (tmp_path / "locks").iterdir())
    assert locks == ["neuroncore-3.lock", "neuroncore-4.lock"]


def test_num_cores_takes_free_cores(nrt, host):
    host.setenv("NEURON_STANDIN_INSTANCE", "trn1.32xlarge")
    host.setenv("NEURON_RT_NUM_CORES", "4")
    assert nrt.init() == N.SUCCESS
    assert nrt.visible_count() == (N.SUCCESS, 4)
    assert nrt.total_count() == (N.SUCCESS, 32)


_HOLDER = """
import sys, time
sys.path.insert(0, {dir!r})
import nrt_ctypes
nrt = nrt_ctypes.Nrt({lib!r})
print(nrt.init(), flush=True)
time.sleep(120)
"""


def test_cores_are_exclusive_between_processes_until_the_holder_dies(nrt, standin, capfd):
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER.format(dir=str(STANDIN_DIR), lib=str(standin.libnrt))],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == str(N.SUCCESS)
        assert nrt.init() == N.RESOURCE
        assert f"pid {holder.pid}" in capfd.readouterr().err
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        holder.stdout.close()
    assert nrt.init() == N.SUCCESS  # the kernel dropped the dead holder's locks


def test_close_releases_cores_to_other_processes(nrt, standin):
    assert nrt.init() == N.SUCCESS
    nrt.nrt_close()
    probe = subprocess.run(
        [sys.executable, "-c", _HOLDER.replace("time.sleep(120)", "").format(
            dir=str(STANDIN_DIR), lib=str(standin.libnrt))],
        capture_output=True, text=True, timeout=30)
    assert probe.stdout.strip() == str(N.SUCCESS)


# --------------------------------------------------------------------------
# libnrt: tensors and memory
# --------------------------------------------------------------------------

def test_tensor_allocation_rules(nrt, host):
    host.setenv("NEURON_STANDIN_HBM_BYTES", str(1 << 20))
    assert nrt.init() == N.SUCCESS
    assert nrt.allocate(0)[0] == N.INVALID
    assert nrt.allocate(64, placement=7)[0] == N.INVALID
    assert nrt.allocate(64, vnc=2)[0] == N.INVALID
    assert nrt.allocate(64, vnc=-1)[0] == N.INVALID
    status, big = nrt.allocate(1 << 20)
    assert status == N.SUCCESS
    assert nrt.allocate(1)[0] == N.RESOURCE  # this core's HBM is full
    assert nrt.allocate(1, vnc=1)[0] == N.SUCCESS  # the other core's is not
    assert nrt.allocate(1, placement=N.HOST)[0] == N.SUCCESS  # host memory is not HBM
    assert nrt.allocate(5 << 20, placement=N.HOST)[0] == N.RESOURCE
    nrt.free(big)
    assert big.value is None
    assert nrt.allocate(1)[0] == N.SUCCESS


def test_memory_stats_are_exact(nrt, host, neffs):
    host.setenv("NEURON_STANDIN_HBM_BYTES", "1000000")
    assert nrt.init() == N.SUCCESS
    status, stats = nrt.memory_stats(0)
    assert (status, stats.bytes_used, stats.bytes_limit) == (N.SUCCESS, 0, 1000000)
    _, a = nrt.allocate(1000)
    _, b = nrt.allocate(24)
    nrt.allocate(100, placement=N.HOST)
    model = _loaded(nrt, neffs["add"])
    assert nrt.memory_stats(0)[1].bytes_used == 1024 + len(neffs["add"])
    assert nrt.memory_stats(1)[1].bytes_used == 0
    nrt.free(a)
    assert nrt.nrt_unload(model) == N.SUCCESS
    assert nrt.memory_stats(0)[1].bytes_used == 24
    assert nrt.memory_stats(2)[0] == N.INVALID


def test_tensor_read_write_copy(nrt):
    assert nrt.init() == N.SUCCESS
    _, a = nrt.allocate(16)
    _, b = nrt.allocate(16)
    _, other_core = nrt.allocate(16, vnc=1)
    _, host_tensor = nrt.allocate(16, placement=N.HOST)
    assert nrt.nrt_tensor_get_size(a) == 16
    assert nrt.write(a, b"0123456789abcdef") == N.SUCCESS
    assert nrt.write(a, b"xy", offset=15) == N.INVALID  # past the end
    assert nrt.read(a, 17)[0] == N.INVALID
    assert nrt.read(a, 4, offset=12) == (N.SUCCESS, b"cdef")
    assert nrt.nrt_tensor_copy(a, 4, b, 0, 8) == N.SUCCESS
    assert nrt.read(b, 8)[1] == b"456789ab"
    assert nrt.nrt_tensor_copy(a, 0, other_core, 0, 8) == N.INVALID  # another core
    assert nrt.nrt_tensor_copy(a, 0, host_tensor, 0, 8) == N.INVALID  # not a device tensor
    assert nrt.nrt_tensor_copy(a, 12, b, 0, 8) == N.INVALID
    stale = ctypes.c_void_p(b.value)
    nrt.free(b)
    assert nrt.read(stale, 1)[0] == N.INVALID_HANDLE


def test_virtual_tensor_needs_an_attached_buffer(nrt):
    assert nrt.init() == N.SUCCESS
    status, virtual = nrt.allocate(8, placement=N.VIRTUAL)
    assert status == N.SUCCESS
    assert nrt.read(virtual, 8)[0] == N.INVALID
    buffer = ctypes.create_string_buffer(b"abcdefgh", 8)
    assert nrt.nrt_tensor_attach_buffer(virtual, buffer, 8) == N.SUCCESS
    assert nrt.read(virtual, 8) == (N.SUCCESS, b"abcdefgh")
    assert nrt.memory_stats(0)[1].bytes_used == 0


# --------------------------------------------------------------------------
# libnrt: load, bind by name, execute
# --------------------------------------------------------------------------

def test_add_from_jax_matches_numpy(nrt, neffs):
    assert nrt.init() == N.SUCCESS
    bound = Bound(nrt, _loaded(nrt, neffs["add"]))
    a, b = np.random.rand(4, 8).astype(np.float32), np.random.rand(4, 8).astype(np.float32)
    bound.write("input0", a)
    bound.write("input1", b)
    assert bound.execute() == N.SUCCESS
    np.testing.assert_array_equal(bound.read("output0", np.float32, (4, 8)), a + b)


def test_matmul_from_jax_matches_numpy(nrt, neffs):
    assert nrt.init() == N.SUCCESS
    bound = Bound(nrt, _loaded(nrt, neffs["matmul"], vnc=1), vnc=1)
    x, w = np.random.rand(2, 3).astype(np.float32), np.random.rand(3, 4).astype(np.float32)
    bound.write("input0", x)
    bound.write("input1", w)
    assert bound.execute() == N.SUCCESS
    np.testing.assert_allclose(bound.read("output0", np.float32, (2, 4)), x @ w, rtol=1e-6)


def test_tensor_info_order_differs_from_program_order(nrt, neffs):
    assert nrt.init() == N.SUCCESS
    listed = nrt.tensor_info(_loaded(nrt, neffs["sum_and_product"]))
    program_order = [(t.name, t.usage) for t in neff_format.decode(neffs["sum_and_product"]).tensors]
    assert [(t.name, t.usage) for t in listed] != program_order
    assert sorted((t.name, t.usage) for t in listed) == sorted(program_order)
    assert all(t.size == 24 and t.shape == [2, 3] and t.dtype == N.DTYPES["float32"]
               for t in listed)


def test_binding_by_position_fails(nrt, neffs, capfd):
    assert nrt.init() == N.SUCCESS
    model = _loaded(nrt, neffs["matmul"])
    listed = nrt.tensor_info(model)
    inputs, outputs = nrt.tensor_set(), nrt.tensor_set()
    program_inputs = [(2, 3), (3, 4)]  # an engine that assumes info order is program order
    listed_inputs = [t for t in listed if t.usage == N.USAGE_INPUT]
    for shape, t in zip(program_inputs, listed_inputs):
        _, tensor = nrt.allocate(4 * shape[0] * shape[1])
        nrt.add(inputs, t.name, tensor)
    for t in listed:
        if t.usage == N.USAGE_OUTPUT:
            nrt.add(outputs, t.name, nrt.allocate(t.size)[1])
    assert nrt.nrt_execute(model, inputs, outputs) == N.EXEC_BAD_INPUT
    assert "bytes; the model needs" in capfd.readouterr().err


def test_execute_checks_every_binding(nrt, neffs, capfd):
    assert nrt.init() == N.SUCCESS
    bound = Bound(nrt, _loaded(nrt, neffs["add"]))
    assert bound.execute() == N.SUCCESS

    missing = nrt.tensor_set()
    nrt.add(missing, "input0", bound.tensors["input0"])
    assert nrt.nrt_execute(bound.model, missing, bound.outputs) == N.EXEC_BAD_INPUT
    assert "'input1' is not in the input set" in capfd.readouterr().err

    wrong_size = nrt.allocate(64)[1]
    nrt.add(bound.inputs, "input1", wrong_size)
    assert bound.execute() == N.EXEC_BAD_INPUT
    nrt.free(wrong_size)  # a freed tensor still in a set
    assert bound.execute() == N.EXEC_BAD_INPUT
    assert "was freed" in capfd.readouterr().err

    other_core = nrt.allocate(128, vnc=1)[1]
    nrt.add(bound.inputs, "input1", other_core)
    assert bound.execute() == N.EXEC_BAD_INPUT
    assert "is on NeuronCore 1" in capfd.readouterr().err

    nrt.add(bound.inputs, "input1", bound.tensors["input1"])
    assert bound.execute() == N.SUCCESS
    assert nrt.nrt_execute(ctypes.c_void_p(12345), bound.inputs, bound.outputs) == \
        N.INVALID_HANDLE


def test_donated_input_is_bound_as_its_output(nrt, neffs, capfd):
    assert nrt.init() == N.SUCCESS
    model = _loaded(nrt, neffs["donated"])
    names = {t.name for t in nrt.tensor_info(model)}
    assert "input0.must_alias_input" in names
    _, donated = nrt.allocate(16)
    _, q = nrt.allocate(16)
    _, doubled_q = nrt.allocate(16)
    nrt.write(donated, np.array([1, 2, 3, 4], np.float32).tobytes())
    nrt.write(q, np.array([10, 20, 30, 40], np.float32).tobytes())
    inputs, outputs = nrt.tensor_set(), nrt.tensor_set()
    nrt.add(inputs, "input0.must_alias_input", donated)
    nrt.add(inputs, "input1", q)
    nrt.add(outputs, "output1", doubled_q)
    nrt.add(outputs, "output0", nrt.allocate(16)[1])  # not the donated tensor
    assert nrt.nrt_execute(model, inputs, outputs) == N.EXEC_BAD_INPUT
    assert "must be the very tensor bound as output 'output0'" in capfd.readouterr().err
    nrt.add(outputs, "output0", donated)
    assert nrt.nrt_execute(model, inputs, outputs) == N.SUCCESS
    np.testing.assert_array_equal(np.frombuffer(nrt.read(donated, 16)[1], np.float32),
                                  [11, 22, 33, 44])


def test_types_are_reported_in_the_sparse_enum(nrt, neffs):
    assert nrt.init() == N.SUCCESS
    bound = Bound(nrt, _loaded(nrt, neffs["mixed_types"]))
    listed = {t.name: (t.dtype, t.size) for t in bound.listed}
    # pred is reported as uint8; the zero-element output is not listed at all
    assert listed == {"input0": (N.DTYPES["int32"], 12), "output0": (N.DTYPES["uint8"], 3),
                      "output1": (N.DTYPES["bfloat16"], 6)}
    bound.write("input0", np.array([-1, 0, 5], np.int32))
    assert bound.execute() == N.SUCCESS
    assert bound.read("output0", np.uint8, (3,)).tolist() == [0, 0, 1]
    assert bound.read("output1", np.uint16, (3,)).tolist() == [0xBF80, 0, 0x40A0]  # -1, 0, 5


def test_load_checks_the_neff(nrt, host, neffs):
    assert nrt.init() == N.SUCCESS
    add = neffs["add"]
    assert nrt.load(add[:-1])[0] == N.INVALID  # truncated
    assert nrt.load(add[:-4] + bytes(4))[0] == N.INVALID  # bad checksum
    newer = bytearray(add[:-4])
    newer[8:12] = struct.pack("<I", 2)
    newer += struct.pack("<I", zlib.crc32(bytes(newer)))
    assert nrt.load(bytes(newer))[0] == N.UNSUPPORTED_NEFF_VERSION
    assert nrt.load(neffs["add_for_trn2"])[0] == N.INVALID  # another chip
    assert nrt.load(add, vnc=2)[0] == N.INVALID
    model = ctypes.c_void_p()
    assert nrt.nrt_load(add, len(add), 0, 2, ctypes.byref(model)) == N.INVALID  # vnc_count


def test_trn2_neff_needs_the_matching_lnc(nrt, host, neffs):
    host.setenv("NEURON_STANDIN_INSTANCE", "trn2.3xlarge")
    host.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    assert nrt.init() == N.SUCCESS
    assert nrt.load(neffs["add_for_trn2"])[0] == N.INVALID  # compiled for --lnc 2
    nrt.nrt_close()
    host.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    assert nrt.init() == N.SUCCESS
    assert nrt.visible_count() == (N.SUCCESS, 4)
    assert nrt.load(neffs["add_for_trn2"])[0] == N.SUCCESS


def test_load_on_any_free_core(nrt, neffs):
    assert nrt.init() == N.SUCCESS
    first, second = nrt.load(neffs["add"], -1), nrt.load(neffs["add"], -1)
    assert first[0] == second[0] == N.SUCCESS
    assert nrt.memory_stats(0)[1].bytes_used == nrt.memory_stats(1)[1].bytes_used
    assert nrt.load(neffs["add"], -1)[0] == N.LOAD_NOT_ENOUGH_NC


def test_numerical_errors_are_reported_when_asked(nrt, host, neffs):
    host.setenv("NEURON_STANDIN_NUMERICAL_ERRORS", "1")
    assert nrt.init() == N.SUCCESS
    bound = Bound(nrt, _loaded(nrt, neffs["add"]))
    bound.write("input0", np.full((4, 8), np.inf, np.float32))
    bound.write("input1", np.ones((4, 8), np.float32))
    assert bound.execute() == N.EXEC_COMPLETED_WITH_NUM_ERR
    assert np.isinf(bound.read("output0", np.float32, (4, 8))).all()  # outputs are written


# --------------------------------------------------------------------------
# libnrt: faults, queueing, timeouts, collectives
# --------------------------------------------------------------------------

def test_fault_injection_on_the_kth_call(nrt, host, neffs, capfd):
    host.setenv("NEURON_STANDIN_FAULT", "nrt_execute:2:1004,nrt_tensor_allocate:1:4,nrt_load:2+:6")
    assert nrt.init() == N.SUCCESS
    assert nrt.allocate(8)[0] == N.RESOURCE
    assert "NEURON_STANDIN_FAULT: call 1 returns 4" in capfd.readouterr().err
    bound = Bound(nrt, _loaded(nrt, neffs["add"]))
    assert [bound.execute() for _ in range(3)] == [N.SUCCESS, N.EXEC_COMPLETED_WITH_ERR, N.SUCCESS]
    assert [nrt.load(neffs["add"])[0] for _ in range(2)] == [6, 6]
    nrt.nrt_close()
    host.setenv("NEURON_STANDIN_FAULT", "nrt_init:1:4")
    assert nrt.init() == N.RESOURCE  # each nrt_init reads the plan afresh


def _timed_executions(bounds) -> float:
    threads = [threading.Thread(target=lambda b=b: b.execute()) for b in bounds]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - started


def test_executions_are_serialised_per_core(nrt, host, neffs):
    host.setenv("NEURON_STANDIN_EXEC_DELAY_MS", "400")
    assert nrt.init() == N.SUCCESS
    same_core = [Bound(nrt, _loaded(nrt, neffs["add"], 0)) for _ in range(2)]
    other_core = Bound(nrt, _loaded(nrt, neffs["add"], 1), vnc=1)
    assert _timed_executions(same_core) >= 0.8
    assert _timed_executions([same_core[0], other_core]) < 0.7


def test_execution_past_the_timeout(nrt, host, neffs, capfd):
    host.setenv("NEURON_STANDIN_EXEC_DELAY_MS", "5000")
    host.setenv("NEURON_RT_EXEC_TIMEOUT", "0.2")
    assert nrt.init() == N.SUCCESS
    assert Bound(nrt, _loaded(nrt, neffs["add"])).execute() == N.TIMEOUT
    assert "NEURON_RT_EXEC_TIMEOUT" in capfd.readouterr().err


def _load_rank(nrt, neff, vnc, rank, world):
    model = ctypes.c_void_p()
    status = nrt.nrt_load_collectives(neff, len(neff), vnc, -1, rank, world, ctypes.byref(model))
    return status, model


def _free_root_address() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_all_reduce_over_two_cores_of_this_process(nrt, host, neffs):
    host.setenv("NEURON_RT_ROOT_COMM_ID", _free_root_address())
    assert nrt.init() == N.SUCCESS
    ranks = []
    for rank in range(2):
        status, model = _load_rank(nrt, neffs["all_reduce"], rank, rank, 2)
        assert status == N.SUCCESS
        bound = Bound(nrt, model, vnc=rank)
        bound.write("input0", np.arange(4, dtype=np.float32) * (rank + 1))
        ranks.append(bound)
    for _ in range(2):
        _timed_executions(ranks)
        for bound in ranks:
            np.testing.assert_array_equal(bound.read("output0", np.float32, (4,)),
                                          np.arange(4) * 3)


def test_collectives_are_checked(nrt, host, neffs, capfd):
    assert nrt.init() == N.SUCCESS
    assert _load_rank(nrt, neffs["all_reduce"], 0, 0, 2)[0] == N.INVALID  # no root comm id
    assert "NEURON_RT_ROOT_COMM_ID" in capfd.readouterr().err
    nrt.nrt_close()
    host.setenv("NEURON_RT_ROOT_COMM_ID", _free_root_address())
    host.setenv("NEURON_RT_EXEC_TIMEOUT", "0.3")
    assert nrt.init() == N.SUCCESS
    assert _load_rank(nrt, neffs["all_reduce"], 0, 2, 2)[0] == N.INVALID  # rank >= world
    status, lonely = _load_rank(nrt, neffs["all_reduce"], 0, 0, 2)
    assert status == N.SUCCESS
    assert Bound(nrt, lonely).execute() == N.TIMEOUT  # rank 1 never comes


# A rank of an all-reduce in a process of its own: loads rank RANK of WORLD on its visible core,
# runs ROUNDS rounds with input arange(4) * (RANK + 1), prints each round's output.
_RANK_PROCESS = """
import os, sys, ctypes
import numpy as np
sys.path.insert(0, {dir!r})
import nrt_ctypes as N
nrt = N.Nrt({lib!r})
assert nrt.init() == N.SUCCESS
neff = open({neff!r}, "rb").read()
model = ctypes.c_void_p()
status = nrt.nrt_load_collectives(neff, len(neff), 0, -1, {rank}, {world}, ctypes.byref(model))
print("load", status, flush=True)
if status == N.SUCCESS and {exit_after_load}:
    sys.stdin.readline()  # the test says when to go
    os._exit(0)
if status == N.SUCCESS:
    listed = nrt.tensor_info(model)
    inputs, outputs, tensors = nrt.tensor_set(), nrt.tensor_set(), {{}}
    for t in listed:
        _, tensor = nrt.allocate(t.size, vnc=0, name=t.name.encode())
        tensors[t.name] = tensor
        nrt.add(inputs if t.usage == N.USAGE_INPUT else outputs, t.name, tensor)
    nrt.write(tensors["input0"], (np.arange(4, dtype=np.float32) * ({rank} + 1)).tobytes())
    for _ in range({rounds}):
        status = nrt.nrt_execute(model, inputs, outputs)
        _, data = nrt.read(tensors["output0"], 16)
        print("round", status, np.frombuffer(data, np.float32).tolist(), flush=True)
nrt.nrt_close()
"""


def _rank_process(standin, neff_path, rank, world, visible_core, rounds=2, exit_after_load=False):
    env = {**os.environ, "NEURON_RT_VISIBLE_CORES": str(visible_core)}
    script = _RANK_PROCESS.format(dir=str(STANDIN_DIR), lib=str(standin.libnrt), neff=str(neff_path),
                                  rank=rank, world=world, rounds=rounds, exit_after_load=exit_after_load)
    return subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def test_all_reduce_across_processes(nrt, host, standin, neffs, tmp_path):
    """Ranks 1 and 2 in processes of their own, started first; rank 0 here hosts the root."""
    host.setenv("NEURON_STANDIN_INSTANCE", "trn1.32xlarge")
    host.setenv("NEURON_RT_ROOT_COMM_ID", _free_root_address())
    host.setenv("NEURON_RT_VISIBLE_CORES", "0")
    neff_path = tmp_path / "all_reduce.neff"
    neff_path.write_bytes(neffs["all_reduce"])
    peers = [_rank_process(standin, neff_path, rank, 3, visible_core=rank) for rank in (1, 2)]
    try:
        assert nrt.init() == N.SUCCESS
        status, model = _load_rank(nrt, neffs["all_reduce"], 0, 0, 3)
        assert status == N.SUCCESS
        bound = Bound(nrt, model)
        bound.write("input0", np.arange(4, dtype=np.float32))
        for _ in range(2):
            assert bound.execute() == N.SUCCESS
            np.testing.assert_array_equal(bound.read("output0", np.float32, (4,)), np.arange(4) * 6)
        for peer in peers:
            out, err = peer.communicate(timeout=60)
            assert peer.returncode == 0, err
            assert out.splitlines() == ["load 0", "round 0 [0.0, 6.0, 12.0, 18.0]",
                                        "round 0 [0.0, 6.0, 12.0, 18.0]"], err
    finally:
        for peer in peers:
            peer.kill()


def test_a_rank_with_no_root_times_out_at_load(nrt, host, neffs, capfd):
    host.setenv("NEURON_RT_ROOT_COMM_ID", _free_root_address())
    host.setenv("NEURON_RT_EXEC_TIMEOUT", "0.3")
    assert nrt.init() == N.SUCCESS
    assert _load_rank(nrt, neffs["all_reduce"], 0, 1, 2)[0] == N.TIMEOUT
    assert "no communicator root at" in capfd.readouterr().err


def test_a_rank_whose_root_process_exited_fails_with_a_collectives_error(nrt, host, standin, neffs,
                                                                          tmp_path, capfd):
    host.setenv("NEURON_RT_ROOT_COMM_ID", _free_root_address())
    host.setenv("NEURON_RT_VISIBLE_CORES", "1")
    neff_path = tmp_path / "all_reduce.neff"
    neff_path.write_bytes(neffs["all_reduce"])
    root = _rank_process(standin, neff_path, 0, 2, visible_core=0, exit_after_load=True)
    try:
        assert root.stdout.readline().strip() == "load 0"
        assert nrt.init() == N.SUCCESS
        status, model = _load_rank(nrt, neffs["all_reduce"], 0, 1, 2)
        assert status == N.SUCCESS
        bound = Bound(nrt, model)
        root.stdin.write("go\n")
        root.stdin.flush()
        root.wait(timeout=30)
        assert bound.execute() == 1200  # NRT_EXEC_HW_ERR_COLLECTIVES
        assert "lost its connection to the communicator root" in capfd.readouterr().err
    finally:
        root.kill()
        root.communicate()
