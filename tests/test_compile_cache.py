"""The persistent compile cache: hits, misses and what invalidates an entry; corrupt and
truncated entries; remembered failures; file modes; processes compiling the same program at
once or dying while they compile; eviction; the `pjrt-neuron cache` commands; the framework
caches (JAX's, torch-xla's) on NEURON devices; and `pjrt-neuron precompile`.

Every test has a cache directory of its own (NEURON_COMPILE_CACHE_URL, read at each compile,
so in-process clients see a monkeypatched value) and reads this process's counters as a
difference (`pjrt_neuron.cache.metrics()` counts since the process started). Every
subprocess gets a lock directory of its own unless it deliberately shares one. The slow
subprocess chains (JAX, torch-xla, precompile) start together when the module starts and
run on a small pool while the in-process tests go on.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import job_pool
import pjrt_capi as P
from assertions import pjrt_error
from programs import DOUBLE
from job_pool import Job, JobPool, uses, wanted_jobs
from pjrt_neuron import cache, cli

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "tests" / "cache_scripts"
EXAMPLES = REPO / "examples"
CLI = Path(sys.executable).with_name("pjrt-neuron")
TIMEOUT = 300

INVALID = P.ErrorCode.INVALID_ARGUMENT
METRIC_KEYS = {"compiles", "cache_hits", "cache_misses", "failures_remembered", "corrupt_entries",
               "compile_seconds", "bytes_written"}
METRICS_LINE = re.compile(r"^pjrt-neuron compile cache: (\{.*\})$", re.M)
UNUSABLE = "is unusable"

# Settings that change what the cache does; each test sets the ones it needs.
_CACHE_SETTINGS = ("PJRT_NEURON_COMPILE_CACHE", "PJRT_NEURON_COMPILE_CACHE_MAX_SIZE",
                   "PJRT_NEURON_COMPILE_CACHE_SHARED", "PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED",
                   "PJRT_NEURON_CACHE_METRICS", "PJRT_NEURON_GRAPH_COLLECTION", "NEURON_CC_FLAGS")
# ... and for subprocesses, also the ones that choose devices and frameworks.
_SCRUBBED = _CACHE_SETTINGS + (
    "PJRT_DEVICE", "CPU_NUM_DEVICES", "JAX_PLATFORMS", "PJRT_NEURON_INSTANCE_TYPE", "NEURON_RT_VISIBLE_CORES",
    "NEURON_RT_NUM_CORES", "NEURON_LOGICAL_NC_CONFIG", "XLA_PERSISTENT_CACHE_PATH", "XLA_USE_SPMD",
    "PJRT_NEURON_TORCH_PLUGIN", "XLA_REGISTER_INSTALLED_PLUGINS")

# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------


BROKEN = DOUBLE.replace("stablehlo.add", "stablehlo.bogus_op")  # does not parse: INVALID_ARGUMENT

A = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def scaled(k: int) -> str:
    """A family of distinct small programs: a * k. For k >= 3 their entries have one size
    (XLA simplifies a * 1 and a * 2, whose entries are smaller)."""
    return f"""
func.func @main(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {{
  %k = stablehlo.constant dense<{k}.0> : tensor<2x3xf32>
  %0 = stablehlo.multiply %a, %k : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}}"""


T16 = "tensor<16x16xf32>"


def chain(blocks: int) -> str:
    """v <- sin(v @ v / 16 + a), `blocks` times: compile time grows with `blocks` (~0.5 s for
    300 here, ~2 s for 800), the values stay in [-1, 1] and match numpy closely."""
    lines = [f"func.func @main(%a: {T16}) -> {T16} {{",
             f"  %c = stablehlo.constant dense<6.250000e-02> : {T16}",
             f"  %v0 = stablehlo.sine %a : {T16}"]
    for i in range(blocks):
        lines += [f"  %d{i} = stablehlo.dot %v{i}, %v{i} : ({T16}, {T16}) -> {T16}",
                  f"  %m{i} = stablehlo.multiply %d{i}, %c : {T16}",
                  f"  %s{i} = stablehlo.add %m{i}, %a : {T16}",
                  f"  %v{i + 1} = stablehlo.sine %s{i} : {T16}"]
    lines.append(f"  return %v{blocks} : {T16}\n}}")
    return "\n".join(lines)


def chain_reference(x: np.ndarray, blocks: int) -> np.ndarray:
    v = np.sin(x)
    for _ in range(blocks):
        v = np.sin((v @ v) * np.float32(0.0625) + x).astype(np.float32)
    return v


X16 = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)

# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A cache directory of the test's own (not created yet), every cache setting at its default."""
    for name in _CACHE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    directory = tmp_path / "cache"
    monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", str(directory))
    return directory


class Counters:
    """This process's cache counters since construction."""

    def __init__(self):
        self.start = cache.metrics()

    def delta(self) -> dict:
        now = cache.metrics()
        return {k: now[k] - self.start[k] for k in now if k != "compile_seconds"}


def entry_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.entry"))


def keys(directory: Path) -> set[str]:
    return {p.name[:-len(".entry")] for p in directory.glob("*.entry")}


def compile_in_fresh_client(api, code=DOUBLE, fmt="mlir", options=None, compile_options=None, run=True):
    """Compiles (and runs on A, or on nothing for run=False) in a client of its own."""
    with P.Client(api, options) as client:
        executable = client.compile(code, fmt, compile_options=compile_options)
        if not run:
            return None
        (outputs,) = executable.execute([client.buffer_from_numpy(A)])
        return [o.to_numpy() for o in outputs]




def run_cli(capture, *argv) -> tuple[int, str]:
    """`pjrt-neuron cache ARGV...` in this process; `capture` is capsys or capfd."""
    capture.readouterr()
    code = cli.main(["cache", *argv])
    return code, capture.readouterr().out


def subprocess_env(cache_directory: Path | None, **settings) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PJRT_NEURON_LOCK_DIR"] = tempfile.mkdtemp(prefix="pjrt-neuron-cache-test-locks-")
    if cache_directory is not None:
        env["NEURON_COMPILE_CACHE_URL"] = str(cache_directory)
    env.update({k: str(v) for k, v in settings.items()})
    return env


def metrics_lines(stderr: str) -> list[dict]:
    return [json.loads(m) for m in METRICS_LINE.findall(stderr)]


class Child:
    """A subprocess whose stdout lines arrive on a queue (so tests can wait for "ready"),
    with stderr in a file (so a chatty child never blocks on a full pipe)."""

    def __init__(self, argv, env, stderr_path: Path):
        self.stderr_path = stderr_path
        self._stderr = open(stderr_path, "w")
        self.proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=self._stderr,
                                     text=True)
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {text!r} within {timeout} s; so far {self.lines}\n{self.stderr()}")
            if line is None:
                raise AssertionError(f"exited ({self.proc.wait()}) before {text!r}: {self.lines}\n{self.stderr()}")
            self.lines.append(line)
            if line == text:
                return

    def finish(self, timeout: float = 120) -> dict:
        """Waits for the exit; returns the JSON of the last stdout line."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"still running after {timeout} s: {self.lines}\n{self.stderr()}")
        while (line := self._queue.get(timeout=10)) is not None:
            self.lines.append(line)
        assert self.proc.returncode == 0, f"exit {self.proc.returncode}: {self.lines}\n{self.stderr()}"
        return json.loads(self.lines[-1])

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text()[-4000:]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def close(self):
        self.kill()
        self._stderr.close()


@pytest.fixture
def children():
    """Starts compile_program.py / hold_lock.py children; kills whatever is left at the end."""
    started: list[Child] = []

    def start(argv, env, stderr_path):
        child = Child(argv, env, stderr_path)
        started.append(child)
        return child

    yield start
    for child in started:
        child.close()


def write_program(tmp_path: Path, code: str, x: np.ndarray) -> tuple[Path, Path]:
    program, data = tmp_path / "program.mlir", tmp_path / "input.npy"
    program.write_text(code)
    np.save(data, x)
    return program, data


def compile_program_argv(program: Path, data: Path, go: Path | None = None) -> list[str]:
    argv = [sys.executable, str(SCRIPTS / "compile_program.py"), str(program), str(data)]
    return argv + (["--go", str(go)] if go else [])


# --------------------------------------------------------------------------
# Slow subprocess chains, started together at module start
# --------------------------------------------------------------------------


def _run(name: str, argv: list, env: dict) -> job_pool.Result:
    return job_pool.run(name, Job(argv, env), REPO, TIMEOUT)


def _cli_argv() -> list[str]:
    return [str(CLI)] if CLI.exists() else [sys.executable, "-m", "pjrt_neuron"]


def _chain_precompile(work: Path) -> dict:
    """`pjrt-neuron precompile -- python train_digits_torch.py --epochs 2`, then a normal run."""
    cache_directory = work / "cache"
    example = [sys.executable, str(EXAMPLES / "train_digits_torch.py"), "--epochs", "2"]
    env = subprocess_env(cache_directory, PJRT_DEVICE="NEURON")
    precompile = _run("precompile", [*_cli_argv(), "precompile", "--workers", "2", "--", *example], env)
    entries_after_precompile = entry_names(cache_directory) if cache_directory.is_dir() else []
    normal = _run("normal run", example, subprocess_env(cache_directory, PJRT_DEVICE="NEURON",
                                                        PJRT_NEURON_CACHE_METRICS=1))
    return {"precompile": precompile, "normal": normal, "entries": entries_after_precompile,
            "entries_after_run": entry_names(cache_directory)}


def _chain_torch_cache(work: Path) -> dict:
    """torch-xla's own cache, two runs; the plugin's cache is off so only torch-xla's can help."""
    torch_cache = work / "torch-xla-cache"
    argv = [sys.executable, str(SCRIPTS / "torch_persistent_cache.py"), str(torch_cache)]
    runs = []
    for i in (1, 2):
        # TF_CPP_MIN_LOG_LEVEL=1 keeps torch-xla's warnings, which say why a cached executable did not load.
        runs.append(_run(f"torch run {i}", argv, subprocess_env(work / "plugin-cache", PJRT_DEVICE="NEURON",
                                                                   PJRT_NEURON_COMPILE_CACHE=0,
                                                                   TF_CPP_MIN_LOG_LEVEL=1)))
    return {"runs": runs, "dir": torch_cache}


def _chain_jax_cache(work: Path) -> dict:
    """JAX's own cache, two runs; the plugin's cache is off so only JAX's can help."""
    jax_cache = work / "jax-cache"
    argv = [sys.executable, str(SCRIPTS / "jax_persistent_cache.py"), str(jax_cache)]
    runs, files = [], []
    for i in (1, 2):
        runs.append(_run(f"jax run {i}", argv, subprocess_env(work / "plugin-cache", JAX_PLATFORMS="neuron",
                                                                 PJRT_NEURON_COMPILE_CACHE=0)))
        files.append(sorted(p.name for p in jax_cache.iterdir()) if jax_cache.is_dir() else [])
    return {"runs": runs, "files": files}


CHAINS = {  # longest first
    "precompile": _chain_precompile,
    "torch_cache": _chain_torch_cache,
    "jax_cache": _chain_jax_cache,
}


@pytest.fixture(scope="module", autouse=True)
def chains(request, tmp_path_factory):
    """Starts the chains the selected tests of this module read, all at once, on two workers."""
    wanted = wanted_jobs(request)
    # Directories made here, in the main thread, and only for the chains that run.
    jobs = {name: functools.partial(fn, tmp_path_factory.mktemp(name)) for name, fn in CHAINS.items()
            if name in wanted}
    with JobPool(jobs, wanted, workers=2, run=lambda name, chain: chain()) as pool:
        yield dict(pool.futures)


# --------------------------------------------------------------------------
# Hits and misses
# --------------------------------------------------------------------------


def test_metrics_have_the_documented_counters():
    assert set(cache.metrics()) == METRIC_KEYS


def test_second_compile_in_a_fresh_client_is_a_hit(plugin_api, cache_dir):
    counters = Counters()
    first = compile_in_fresh_client(plugin_api)
    assert counters.delta() == {"compiles": 1, "cache_hits": 0, "cache_misses": 1, "failures_remembered": 0,
                                "corrupt_entries": 0, "bytes_written": counters.delta()["bytes_written"]}
    [entry] = cache_dir.glob("*.entry")
    assert counters.delta()["bytes_written"] == entry.stat().st_size
    before = entry.read_bytes()

    counters = Counters()
    second = compile_in_fresh_client(plugin_api)
    assert counters.delta() == {"compiles": 0, "cache_hits": 1, "cache_misses": 0, "failures_remembered": 0,
                                "corrupt_entries": 0, "bytes_written": 0}
    assert list(cache_dir.glob("*.entry")) == [entry] and entry.read_bytes() == before  # nothing new written
    np.testing.assert_array_equal(first[0], A + A)
    np.testing.assert_array_equal(second[0], A + A)


def test_second_run_in_a_fresh_process_is_a_hit(tmp_path, children):
    """Across processes, and the PJRT_NEURON_CACHE_METRICS=1 line printed at exit."""
    directory = tmp_path / "cache"
    program, data = write_program(tmp_path, chain(5), X16)
    results, printed = [], []
    for i in (1, 2):
        child = children(compile_program_argv(program, data),
                         subprocess_env(directory, PJRT_NEURON_CACHE_METRICS=1), tmp_path / f"stderr{i}")
        results.append(child.finish())
        printed.append(metrics_lines(child.stderr()))
        if i == 1:
            entries_after_first = {p.name: p.read_bytes() for p in directory.glob("*.entry")}
    first, second = results
    assert first["metrics"]["compiles"] == 1 and first["metrics"]["cache_misses"] == 1
    assert first["metrics"]["cache_hits"] == 0 and first["metrics"]["bytes_written"] > 0
    assert second["metrics"]["compiles"] == 0 and second["metrics"]["cache_hits"] == 1
    assert second["metrics"]["cache_misses"] == 0 and second["metrics"]["bytes_written"] == 0
    assert {p.name: p.read_bytes() for p in directory.glob("*.entry")} == entries_after_first
    assert len(entries_after_first) == 1
    # The line at exit says what metrics() said (the run's compile seconds aside).
    for run, lines in zip(results, printed):
        assert len(lines) == 1, lines
        assert set(lines[0]) == METRIC_KEYS
        assert {k: v for k, v in lines[0].items() if k != "compile_seconds"} == \
            {k: v for k, v in run["metrics"].items() if k != "compile_seconds"}
    np.testing.assert_allclose(first["output"], chain_reference(X16, 5), atol=1e-5)
    assert second["output"] == first["output"]


# --------------------------------------------------------------------------
# What invalidates an entry: each part of the key we can vary
# --------------------------------------------------------------------------

# (client create options, environment, program, compile options) for two variants that must not
# share an entry.
VARIANTS = {
    "program_text": ((None, {}, scaled(2), None), (None, {}, scaled(3), None)),
    "compile_options_num_replicas": ((None, {}, DOUBLE, P.compile_options_proto()),
                                     (None, {}, DOUBLE, P.compile_options_proto(num_replicas=2))),
    "neuron_cc_flags": ((None, {"NEURON_CC_FLAGS": "--optlevel=1"}, DOUBLE, None),
                        (None, {"NEURON_CC_FLAGS": "--optlevel=2"}, DOUBLE, None)),
    "neuron_cc_flags_set_vs_unset": ((None, {}, DOUBLE, None),
                                     (None, {"NEURON_CC_FLAGS": "--model-type=transformer"}, DOUBLE, None)),
    "core_generation_trn1_vs_trn2": (({"instance_type": "trn1.2xlarge"}, {}, DOUBLE, None),
                                     ({"instance_type": "trn2.48xlarge"}, {}, DOUBLE, None)),
    "logical_nc_config": (({"instance_type": "trn2.48xlarge", "logical_nc_config": 2}, {}, DOUBLE, None),
                          ({"instance_type": "trn2.48xlarge", "logical_nc_config": 1}, {}, DOUBLE, None)),
}


def _compile_variant(api, monkeypatch, variant):
    options, env, code, compile_options = variant
    monkeypatch.delenv("NEURON_CC_FLAGS", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    replicas_2 = compile_options == P.compile_options_proto(num_replicas=2)
    return compile_in_fresh_client(api, code, options=options, compile_options=compile_options,
                                   run=not replicas_2)


@pytest.mark.parametrize("part", list(VARIANTS))
def test_each_part_of_the_key_gets_its_own_entry(plugin_api, cache_dir, monkeypatch, part):
    first, second = VARIANTS[part]
    counters = Counters()
    _compile_variant(plugin_api, monkeypatch, first)
    key_first = keys(cache_dir)
    _compile_variant(plugin_api, monkeypatch, second)
    assert counters.delta()["compiles"] == 2 and counters.delta()["cache_hits"] == 0, counters.delta()
    assert len(keys(cache_dir)) == 2 and key_first < keys(cache_dir)

    # Each variant finds its own entry again.
    counters = Counters()
    for variant in (first, second, first):
        out = _compile_variant(plugin_api, monkeypatch, variant)
        if out is not None and variant[2] == DOUBLE:
            np.testing.assert_array_equal(out[0], A + A)
    assert counters.delta()["compiles"] == 0 and counters.delta()["cache_hits"] == 3, counters.delta()
    assert len(keys(cache_dir)) == 2


def test_what_is_not_part_of_the_key_shares_the_entry(plugin_api, cache_dir):
    """Same core generation on another instance size, and equivalent compile options (the
    all-defaults proto means 1 replica x 1 partition), load the same entry."""
    compile_in_fresh_client(plugin_api, options={"instance_type": "trn1.2xlarge"})
    counters = Counters()
    out = compile_in_fresh_client(plugin_api, options={"instance_type": "trn1.32xlarge"})
    np.testing.assert_array_equal(out[0], A + A)
    compile_in_fresh_client(plugin_api, compile_options=b"", run=False)
    assert counters.delta()["compiles"] == 0 and counters.delta()["cache_hits"] == 2, counters.delta()
    assert len(keys(cache_dir)) == 1


@pytest.fixture(scope="module")
def jax_programs():
    """The same function as StableHLO text ("mlir") and as a serialized HloModuleProto ("hlo")."""
    jax = pytest.importorskip("jax")
    spec = jax.ShapeDtypeStruct((2, 3), np.float32)

    def f(a):
        return jax.numpy.sin(a) * 2.0 + a

    lowered = jax.jit(f).trace(spec).lower(lowering_platforms=("cpu",))
    return lowered.as_text(), lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()


def test_hlo_and_mlir_formats_get_their_own_entries(plugin_api, cache_dir, jax_programs):
    mlir_text, hlo_proto = jax_programs
    counters = Counters()
    from_mlir = compile_in_fresh_client(plugin_api, mlir_text, "mlir")
    from_hlo = compile_in_fresh_client(plugin_api, hlo_proto, "hlo")
    assert counters.delta()["compiles"] == 2
    assert sorted(e.header["format"] for e in cache.entries(cache_dir)) == ["hlo", "mlir"]

    counters = Counters()
    again_hlo = compile_in_fresh_client(plugin_api, hlo_proto, "hlo")
    again_mlir = compile_in_fresh_client(plugin_api, mlir_text, "mlir")
    assert counters.delta()["compiles"] == 0 and counters.delta()["cache_hits"] == 2
    want = np.sin(A) * 2.0 + A
    for out in (from_mlir, from_hlo, again_hlo, again_mlir):
        np.testing.assert_allclose(out[0], want, rtol=1e-6)


# --------------------------------------------------------------------------
# Corrupt and truncated entries
# --------------------------------------------------------------------------


def _flip_payload_byte(path: Path):
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _truncate_inside_header(path: Path):
    path.write_bytes(path.read_bytes()[:30])


def _flip_magic(path: Path):
    data = path.read_bytes()
    path.write_bytes(b"X" + data[1:])


def _append_garbage(path: Path):
    with open(path, "ab") as f:
        f.write(b"\0\0\0")


DAMAGE = {"flipped_payload_byte": _flip_payload_byte, "truncated": _truncate,
          "truncated_inside_header": _truncate_inside_header, "flipped_magic": _flip_magic,
          "extra_bytes": _append_garbage}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_entry_is_reported_once_removed_and_recompiled(plugin_api, cache_dir, capfd, damage):
    compile_in_fresh_client(plugin_api)
    [entry] = cache_dir.glob("*.entry")
    DAMAGE[damage](entry)
    code, out = run_cli(capfd, "stats", "--json")
    assert json.loads(out)["corrupt_entries"] == 1
    code, out = run_cli(capfd, "ls")
    assert re.search(r"\sNO\s", out), out

    capfd.readouterr()
    counters = Counters()
    out = compile_in_fresh_client(plugin_api)
    stderr = capfd.readouterr().err
    np.testing.assert_array_equal(out[0], A + A)
    reports = [line for line in stderr.splitlines() if UNUSABLE in line]
    assert len(reports) == 1, stderr
    assert str(entry) in reports[0] and "compiling again" in reports[0]
    assert counters.delta()["corrupt_entries"] == 1 and counters.delta()["compiles"] == 1, counters.delta()
    # Replaced by a good entry, which the next compile uses without a word.
    [good] = cache.entries(cache_dir)
    assert good.path == entry and good.valid
    counters = Counters()
    compile_in_fresh_client(plugin_api)
    assert UNUSABLE not in capfd.readouterr().err
    assert counters.delta()["cache_hits"] == 1 and counters.delta()["corrupt_entries"] == 0


def test_entry_the_engine_cannot_load_is_replaced(plugin_api, cache_dir):
    """Whole and checksummed, but not an executable this engine can load (as if written by
    another engine version): compiled again, the process survives, the result is right."""
    compile_in_fresh_client(plugin_api)
    [entry] = cache_dir.glob("*.entry")
    data = entry.read_bytes()
    header_end = data.index(b"\n", len(cache.MAGIC))
    payload = bytes(b ^ 0x5A for b in data[header_end + 1 + 40:])
    entry.write_bytes(data[:header_end + 1] + len(payload).to_bytes(8, "little") +
                      hashlib.sha256(payload).digest() + payload)
    assert cache.entries(cache_dir)[0].valid  # the framing is fine
    counters = Counters()
    out = compile_in_fresh_client(plugin_api)
    np.testing.assert_array_equal(out[0], A + A)
    assert counters.delta()["compiles"] == 1 and counters.delta()["cache_hits"] == 0
    counters = Counters()
    compile_in_fresh_client(plugin_api)
    assert counters.delta()["cache_hits"] == 1


# --------------------------------------------------------------------------
# Remembered failures
# --------------------------------------------------------------------------


def test_failed_compilation_is_remembered(plugin_api, cache_dir, capsys):
    counters = Counters()
    with pjrt_error(INVALID, "bogus_op") as first:
        compile_in_fresh_client(plugin_api, BROKEN)
    assert "remembered" not in first.value.message
    [failed] = cache_dir.glob("*.failed")
    assert counters.delta()["compiles"] == 1

    counters = Counters()
    start = time.monotonic()
    with pjrt_error(INVALID, "bogus_op", "remembered", "PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED=1",
                    "pjrt-neuron cache clear --failed"):
        compile_in_fresh_client(plugin_api, BROKEN)
    assert time.monotonic() - start < 2
    assert counters.delta()["compiles"] == 0 and counters.delta()["failures_remembered"] == 1, counters.delta()
    code, out = run_cli(capsys, "stats", "--json")
    assert json.loads(out)["failed_compilations"] == 1 and json.loads(out)["entries"] == 0


def test_retry_failed_compiles_again(plugin_api, cache_dir, monkeypatch):
    with pjrt_error(INVALID):
        compile_in_fresh_client(plugin_api, BROKEN)
    monkeypatch.setenv("PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED", "1")
    counters = Counters()
    with pjrt_error(INVALID, "bogus_op") as retried:
        compile_in_fresh_client(plugin_api, BROKEN)
    assert "remembered" not in retried.value.message
    assert counters.delta()["compiles"] == 1 and counters.delta()["failures_remembered"] == 0


def test_cache_clear_failed_forgets_failures_only(plugin_api, cache_dir, capsys):
    compile_in_fresh_client(plugin_api)  # a good entry, which must stay
    with pjrt_error(INVALID):
        compile_in_fresh_client(plugin_api, BROKEN)
    entries_before = entry_names(cache_dir)
    code, out = run_cli(capsys, "clear", "--failed")
    assert code == 0 and out.strip() == f"removed 1 file(s) from {cache_dir}"
    assert not list(cache_dir.glob("*.failed")) and entry_names(cache_dir) == entries_before
    counters = Counters()
    with pjrt_error(INVALID, "bogus_op") as again:
        compile_in_fresh_client(plugin_api, BROKEN)
    assert "remembered" not in again.value.message
    assert counters.delta()["compiles"] == 1
    counters = Counters()
    compile_in_fresh_client(plugin_api)
    assert counters.delta()["cache_hits"] == 1


def test_successful_retry_forgets_the_failure(plugin_api, cache_dir, monkeypatch):
    """A failure remembered for a program that compiles now (a transient or since-fixed
    failure): once a retry succeeds, later runs without RETRY_FAILED must use the new entry
    instead of failing from the stale memory."""
    compile_in_fresh_client(plugin_api)
    [entry] = cache_dir.glob("*.entry")
    key = entry.name[:-len(".entry")]
    entry.unlink()
    (cache_dir / f"{key}.failed").write_text(f"{int(INVALID)}\nthe compiler crashed")
    with pjrt_error(INVALID, "the compiler crashed", "remembered"):
        compile_in_fresh_client(plugin_api)

    monkeypatch.setenv("PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED", "1")
    np.testing.assert_array_equal(compile_in_fresh_client(plugin_api)[0], A + A)
    assert entry.exists()
    monkeypatch.delenv("PJRT_NEURON_COMPILE_CACHE_RETRY_FAILED")
    counters = Counters()
    np.testing.assert_array_equal(compile_in_fresh_client(plugin_api)[0], A + A)
    assert counters.delta()["cache_hits"] == 1


# --------------------------------------------------------------------------
# Settings: file modes, off, bad values
# --------------------------------------------------------------------------


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_entries_are_private_by_default(plugin_api, cache_dir):
    with umask(0):  # even a permissive umask does not open them up
        compile_in_fresh_client(plugin_api)
        with pjrt_error(INVALID):
            compile_in_fresh_client(plugin_api, BROKEN)
    [entry] = cache_dir.glob("*.entry")
    [failed] = cache_dir.glob("*.failed")
    assert oct(_mode(entry)) == oct(0o600) and oct(_mode(failed)) == oct(0o600)
    assert oct(_mode(cache_dir)) == oct(0o700)


def test_shared_entries_are_readable_by_everyone(plugin_api, cache_dir, monkeypatch):
    monkeypatch.setenv("PJRT_NEURON_COMPILE_CACHE_SHARED", "1")
    with umask(0o077):  # ... whatever the umask
        compile_in_fresh_client(plugin_api)
        with pjrt_error(INVALID):
            compile_in_fresh_client(plugin_api, BROKEN)
    [entry] = cache_dir.glob("*.entry")
    [failed] = cache_dir.glob("*.failed")
    assert oct(_mode(entry)) == oct(0o644) and oct(_mode(failed)) == oct(0o644)


def test_shared_cache_directory_is_readable_by_everyone(plugin_api, cache_dir, monkeypatch):
    """World-readable entries are of no use in a directory others cannot enter: the shared
    cache's directory must be 0755 under the same umask the entries' modes ignore."""
    monkeypatch.setenv("PJRT_NEURON_COMPILE_CACHE_SHARED", "1")
    with umask(0o077):
        compile_in_fresh_client(plugin_api)
    assert oct(_mode(cache_dir)) == oct(0o755)


def test_cache_off_neither_reads_nor_writes(plugin_api, cache_dir, monkeypatch):
    monkeypatch.setenv("PJRT_NEURON_COMPILE_CACHE", "0")
    counters = Counters()
    for _ in range(2):
        np.testing.assert_array_equal(compile_in_fresh_client(plugin_api)[0], A + A)
    with pjrt_error(INVALID):
        compile_in_fresh_client(plugin_api, BROKEN)
    assert not cache_dir.exists()
    assert counters.delta() == {"compiles": 3, "cache_hits": 0, "cache_misses": 0, "failures_remembered": 0,
                                "corrupt_entries": 0, "bytes_written": 0}
    # An existing entry is not read either.
    monkeypatch.setenv("PJRT_NEURON_COMPILE_CACHE", "1")
    compile_in_fresh_client(plugin_api)
    before = {p.name: p.stat().st_mtime_ns for p in cache_dir.iterdir()}
    monkeypatch.setenv("PJRT_NEURON_COMPILE_CACHE", "0")
    counters = Counters()
    compile_in_fresh_client(plugin_api)
    assert counters.delta()["compiles"] == 1 and counters.delta()["cache_hits"] == 0
    assert {p.name: p.stat().st_mtime_ns for p in cache_dir.iterdir()} == before


@pytest.mark.parametrize("name, value, fragment", [
    ("PJRT_NEURON_COMPILE_CACHE", "yes", "PJRT_NEURON_COMPILE_CACHE='yes'"),
    ("PJRT_NEURON_COMPILE_CACHE_MAX_SIZE", "lots", "500M"),
    ("PJRT_NEURON_COMPILE_CACHE_MAX_SIZE", "10T", "PJRT_NEURON_COMPILE_CACHE_MAX_SIZE='10T'"),
])
def test_bad_setting_is_invalid_argument(plugin_api, cache_dir, monkeypatch, name, value, fragment):
    monkeypatch.setenv(name, value)
    with pjrt_error(INVALID, fragment):
        compile_in_fresh_client(plugin_api)


# --------------------------------------------------------------------------
# Several processes
# --------------------------------------------------------------------------

CONCURRENT_BLOCKS = 300  # ~0.5 s to compile here: long enough for both to be inside Compile at once


def test_two_processes_compiling_one_program_compile_it_once(tmp_path, children):
    directory = tmp_path / "cache"
    program, data = write_program(tmp_path, chain(CONCURRENT_BLOCKS), X16)
    go = tmp_path / "go"
    started = [children(compile_program_argv(program, data, go), subprocess_env(directory), tmp_path / f"err{i}")
               for i in range(2)]
    for child in started:
        child.wait_for("ready")
    go.touch()  # both start compiling within a few milliseconds
    results = [child.finish() for child in started]
    for r in results:
        assert "error" not in r, r
    metrics = [r["metrics"] for r in results]
    assert sum(m["compiles"] for m in metrics) == 1, metrics
    assert sum(m["cache_misses"] for m in metrics) == 1, metrics
    assert sum(m["cache_hits"] for m in metrics) == 1, metrics
    assert len(entry_names(directory)) == 1
    assert results[0]["output"] == results[1]["output"]
    np.testing.assert_allclose(results[0]["output"], chain_reference(X16, CONCURRENT_BLOCKS), atol=1e-5)
    # They did overlap: the one that loaded waited for most of the other's compilation.
    compiler = next(r for r in results if r["metrics"]["compiles"] == 1)
    loader = next(r for r in results if r["metrics"]["cache_hits"] == 1)
    assert loader["compile_wall_seconds"] >= 0.5 * compiler["metrics"]["compile_seconds"], results


def _key_of(api, code: str, scratch: Path, monkeypatch) -> str:
    """The cache key of `code` compiled with default options (keys do not depend on the directory)."""
    monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", str(scratch))
    with P.Client(api) as client:
        client.compile(code)
    [entry] = scratch.glob("*.entry")
    return entry.name[:-len(".entry")]


def test_dead_lock_holder_does_not_block_others(plugin_api, cache_dir, tmp_path, monkeypatch, children):
    """A process holding a key's lock (as a compiler does) makes another wait; once it is
    SIGKILLed, the other goes on, compiles and runs the program."""
    code = chain(4)
    key = _key_of(plugin_api, code, tmp_path / "scratch", monkeypatch)
    cache_dir.mkdir()
    holder = children([sys.executable, str(SCRIPTS / "hold_lock.py"), str(cache_dir / f"{key}.lock")],
                      subprocess_env(None), tmp_path / "holder.err")
    holder.wait_for("locked", timeout=30)
    program, data = write_program(tmp_path, code, X16)
    compiler = children(compile_program_argv(program, data), subprocess_env(cache_dir), tmp_path / "compiler.err")
    compiler.wait_for("compiling")
    time.sleep(1.5)
    assert compiler.proc.poll() is None, "did not wait for the lock"
    assert not list(cache_dir.glob("*.entry"))
    holder.kill()
    result = compiler.finish(timeout=60)
    assert "error" not in result, result
    assert result["compile_wall_seconds"] >= 1.0
    assert result["metrics"]["compiles"] == 1 and result["metrics"]["cache_misses"] == 1
    np.testing.assert_allclose(result["output"], chain_reference(X16, 4), atol=1e-5)
    assert [e.valid for e in cache.entries(cache_dir)] == [True]


KILLED_BLOCKS = 800  # ~2 s to compile here


def test_compiler_killed_midway_leaves_nothing_and_the_waiter_compiles(tmp_path, children):
    directory = tmp_path / "cache"
    program, data = write_program(tmp_path, chain(KILLED_BLOCKS), X16)
    go_first, go_second = tmp_path / "go1", tmp_path / "go2"
    first = children(compile_program_argv(program, data, go_first), subprocess_env(directory), tmp_path / "e1")
    second = children(compile_program_argv(program, data, go_second), subprocess_env(directory), tmp_path / "e2")
    first.wait_for("ready")
    second.wait_for("ready")
    go_first.touch()
    first.wait_for("compiling")
    time.sleep(0.2)  # the first holds the key's lock
    go_second.touch()
    second.wait_for("compiling")
    time.sleep(0.3)  # the second waits for it
    assert first.proc.poll() is None, "the first finished compiling too soon for this test"
    first.kill()
    assert not list(directory.glob("*.entry")), "the killed compiler finished before it was killed"
    result = second.finish(timeout=120)
    assert "error" not in result, result
    assert result["metrics"]["compiles"] == 1 and result["metrics"]["cache_misses"] == 1
    assert result["metrics"]["cache_hits"] == 0
    # It waited on the first's lock before compiling itself.
    assert result["compile_wall_seconds"] - result["metrics"]["compile_seconds"] >= 0.15, result
    np.testing.assert_allclose(result["output"], chain_reference(X16, KILLED_BLOCKS), atol=1e-5)
    assert [e.valid for e in cache.entries(directory)] == [True]
    assert not list(directory.glob("*.tmp.*"))


def test_process_started_after_a_killed_compiler_compiles(tmp_path, children):
    """SIGKILL while compiling (holding the key's lock) leaves the lock file and nothing else;
    a process started afterwards takes the lock, compiles, and leaves one valid entry."""
    directory = tmp_path / "cache"
    program, data = write_program(tmp_path, chain(KILLED_BLOCKS), X16)
    first = children(compile_program_argv(program, data), subprocess_env(directory), tmp_path / "e1")
    first.wait_for("compiling")
    time.sleep(0.3)
    assert first.proc.poll() is None, "the first finished compiling too soon for this test"
    first.kill()
    assert list(directory.glob("*.lock")) and not list(directory.glob("*.entry"))
    result = children(compile_program_argv(program, data), subprocess_env(directory),
                      tmp_path / "e2").finish(timeout=120)
    assert "error" not in result, result
    assert result["metrics"]["compiles"] == 1 and result["metrics"]["cache_misses"] == 1
    np.testing.assert_allclose(result["output"], chain_reference(X16, KILLED_BLOCKS), atol=1e-5)
    assert [e.valid for e in cache.entries(directory)] == [True]
    assert not list(directory.glob("*.tmp.*"))


# --------------------------------------------------------------------------
# Eviction and pruning
# --------------------------------------------------------------------------


def _key_after(directory: Path, before: set[str]) -> str:
    [new] = keys(directory) - before
    return new


def test_eviction_keeps_the_most_recently_used_within_the_limit(plugin_api, cache_dir, monkeypatch):
    made = []
    compile_in_fresh_client(plugin_api, scaled(3))
    made.append(_key_after(cache_dir, set()))
    size = next(cache_dir.glob("*.entry")).stat().st_size
    # Room for three entries, not four.
    monkeypatch.setenv("PJRT_NEURON_COMPILE_CACHE_MAX_SIZE", f"{3.5 * size / 1024:.2f}K")
    for k in (4, 5, 6):
        before = keys(cache_dir)
        compile_in_fresh_client(plugin_api, scaled(k))
        made.append(_key_after(cache_dir, before))
    assert {e.size for e in cache.entries(cache_dir)} == {size}
    assert keys(cache_dir) == set(made[1:4])  # the oldest went
    # Using an entry makes it recent: the second is used, so the third goes next.
    compile_in_fresh_client(plugin_api, scaled(4))
    before = keys(cache_dir)
    compile_in_fresh_client(plugin_api, scaled(7))
    made.append(_key_after(cache_dir, before))
    assert keys(cache_dir) == {made[1], made[3], made[4]}
    assert sum(p.stat().st_size for p in cache_dir.glob("*.entry")) <= 3.5 * size


def test_cache_prune_removes_least_recently_used(plugin_api, cache_dir, capsys):
    made = []
    for k in range(3, 7):
        before = keys(cache_dir)
        compile_in_fresh_client(plugin_api, scaled(k))
        made.append(_key_after(cache_dir, before))
    compile_in_fresh_client(plugin_api, scaled(3))  # used last now
    sizes = {e.key: e.size for e in cache.entries(cache_dir)}
    limit = int(2.5 * max(sizes.values()))
    code, out = run_cli(capsys, "prune", "--max-size", str(limit))
    assert code == 0
    removed = sizes[made[1]] + sizes[made[2]]
    assert out.strip() == f"removed 2 entries ({removed} bytes) from {cache_dir}"
    assert keys(cache_dir) == {made[0], made[3]}
    code, out = run_cli(capsys, "prune", "--max-size", "1M")
    assert out.strip() == f"removed 0 entries (0 bytes) from {cache_dir}"


@pytest.mark.parametrize("size", ["lots", "10T", "-5M"])
def test_cache_prune_rejects_a_bad_size_cleanly(plugin_api, cache_dir, capsys, size):
    """A usage error (exit 2, a message naming the value, as the plugin's own parser says for
    PJRT_NEURON_COMPILE_CACHE_MAX_SIZE), not a traceback, and nothing removed."""
    compile_in_fresh_client(plugin_api)
    before = entry_names(cache_dir)
    try:
        code = cli.main(["cache", "prune", f"--max-size={size}"])
    finally:
        after = entry_names(cache_dir)
    assert after == before, "entries were removed"
    assert code == 2
    err = capsys.readouterr().err
    assert size in err and "500M" in err, err


# --------------------------------------------------------------------------
# cache ls / stats / clear
# --------------------------------------------------------------------------


def test_cache_ls_and_stats(plugin_api, cache_dir, capsys):
    code, out = run_cli(capsys, "stats", "--json")
    assert json.loads(out) == {"directory": str(cache_dir), "entries": 0, "bytes": 0, "corrupt_entries": 0,
                               "failed_compilations": 0}
    compile_in_fresh_client(plugin_api, scaled(3))
    compile_in_fresh_client(plugin_api, scaled(4))
    with pjrt_error(INVALID):
        compile_in_fresh_client(plugin_api, BROKEN)
    found = cache.entries(cache_dir)
    total = sum(e.size for e in found)

    code, out = run_cli(capsys, "ls")
    lines = out.strip().splitlines()
    assert code == 0 and lines[0] == f"compile cache: {cache_dir}"
    assert lines[1].split() == ["KEY", "SIZE", "LAST", "USED", "OK", "PROGRAM"]
    assert len(lines) == 4
    for line, entry in zip(lines[2:], found):  # least recently used first
        fields = line.split()
        assert fields[0] == entry.key[:16] and fields[1] == str(entry.size)
        assert fields[4:] == ["yes", "main", "(mlir)"]

    code, out = run_cli(capsys, "ls", "--json")
    listed = json.loads(out)
    assert [e["key"] for e in listed] == [e.key for e in found]
    for item in listed:
        assert len(item["key"]) == 64 and item["valid"] is True and item["format"] == "mlir"
        assert item["program"] == "main" and item["plugin"] and item["engine"]
        assert abs(item["created"] - time.time()) < 600 and item["size"] > 0

    code, out = run_cli(capsys, "stats")
    assert out.strip().splitlines() == [f"directory: {cache_dir}", "entries: 2", f"bytes: {total}",
                                        "corrupt_entries: 0", "failed_compilations: 1"]
    code, out = run_cli(capsys, "stats", "--json")
    assert json.loads(out) == {"directory": str(cache_dir), "entries": 2, "bytes": total, "corrupt_entries": 0,
                               "failed_compilations": 1}


def test_cache_ls_runs_as_a_command(tmp_path):
    """The installed command, as a user runs it, on an empty cache."""
    out = subprocess.run([*_cli_argv(), "cache", "ls"], env=subprocess_env(tmp_path / "none"),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == f"compile cache: {tmp_path / 'none'}"


def test_cache_clear_removes_everything(plugin_api, cache_dir, capsys):
    compile_in_fresh_client(plugin_api)
    with pjrt_error(INVALID):
        compile_in_fresh_client(plugin_api, BROKEN)
    files = list(cache_dir.iterdir())  # an entry, a failure, and their two locks
    assert len(files) == 4, files
    code, out = run_cli(capsys, "clear")
    assert code == 0 and out.strip() == f"removed 4 file(s) from {cache_dir}"
    assert list(cache_dir.iterdir()) == []
    counters = Counters()
    compile_in_fresh_client(plugin_api)
    assert counters.delta()["compiles"] == 1 and counters.delta()["cache_hits"] == 0


# --------------------------------------------------------------------------
# The frameworks' own caches, and precompile
# --------------------------------------------------------------------------


@uses("jax_cache")
def test_jax_persistent_cache_loads_on_neuron(chains):
    got = chains["jax_cache"].result()
    first, second = (r.json() for r in got["runs"])
    files_first, files_second = got["files"]
    assert first["platform"] == "neuron"
    assert len([f for f in files_first if f.endswith("-cache")]) == 2, files_first
    assert files_second == files_first
    assert sum("MISS" in line for line in first["log"]) == 2, first["log"]
    assert sum("cache hit" in line for line in second["log"]) == 2, second["log"]
    # The plugin's cache is off in these runs: only JAX's cache spared the second one compiling.
    assert first["plugin_metrics"]["compiles"] == 2
    assert second["plugin_metrics"]["compiles"] == 0, second["plugin_metrics"]
    for run in (first, second):
        for name in ("affine", "gram"):
            np.testing.assert_allclose(run["results"][name], run["expected"][name], rtol=1e-5, atol=1e-5)
    assert second["results"] == first["results"]


@uses("torch_cache")
def test_torch_xla_cache_files_appear_and_results_are_right(chains):
    got = chains["torch_cache"].result()
    first, second = (r.json() for r in got["runs"])
    assert first["device_type"] == "NEURON"
    assert first["cache_files"], "torch-xla wrote nothing to its cache"
    assert second["cache_files"] == first["cache_files"]
    for run in (first, second):
        np.testing.assert_allclose(run["xla_losses"], run["cpu_losses"], rtol=1e-5)
        assert run["max_param_diff"] < 1e-5
    assert second["xla_losses"] == first["xla_losses"]


TORCH_XLA_DESERIALIZE = "Deserializing serialized executable not supported"


@uses("torch_cache")
def test_torch_xla_cache_second_run_loads(chains):
    got = chains["torch_cache"].result()
    second_run = got["runs"][1]
    second = second_run.json()
    counters = second["torch_xla_counters"]
    if not counters.get("PersistentCacheHit") and TORCH_XLA_DESERIALIZE in second_run.stderr:
        # torch-xla 2.9's DeserializeComputation calls PjRtClient::DeserializeExecutable, which its
        # PJRT C API client (every plugin, and torch-xla's own CPU client) leaves UNIMPLEMENTED,
        # so no executable is ever loaded from its cache: pytorch/xla#9094, fix proposed in #9759.
        pytest.xfail(f"torch-xla cannot load from its persistent cache ({TORCH_XLA_DESERIALIZE}; "
                     f"pytorch/xla#9094); counters {counters}")
    assert counters.get("PersistentCacheHit", 0) >= 1, counters
    assert not counters.get("PersistentCacheDeserializeFailure"), counters
    assert second["plugin_metrics"]["compiles"] == 0, second["plugin_metrics"]


@pytest.mark.parametrize("visible_core", ["0", "1"])
def test_precompiled_program_is_found_on_any_visible_core(plugin_api, cache_dir, tmp_path, monkeypatch,
                                                          visible_core):
    """The precompile flow in one process: record a program in graph collection mode, compile
    the record as a `pjrt-neuron precompile` worker does, then compile it normally with the same
    settings: a hit, also when NEURON_RT_VISIBLE_CORES gives the process a core other than 0
    (the program then names that core's device id)."""
    from pjrt_neuron import precompile

    options = {"visible_cores": visible_core}
    compile_options = P.compile_options_proto(device_ordinal=int(visible_core))
    records = tmp_path / "records"
    monkeypatch.setenv("PJRT_NEURON_GRAPH_COLLECTION", str(records))
    compile_in_fresh_client(plugin_api, options=options, compile_options=compile_options, run=False)
    monkeypatch.delenv("PJRT_NEURON_GRAPH_COLLECTION")
    [record] = records.glob("*.program")
    assert not cache_dir.exists() or not list(cache_dir.glob("*.entry"))  # collecting compiles nothing into it
    _, outcome, message = precompile._compile_record(str(record))
    assert outcome == precompile.COMPILED, message
    assert len(entry_names(cache_dir)) == 1

    counters = Counters()
    with P.Client(plugin_api, options) as client:
        executable = client.compile(DOUBLE, compile_options=compile_options)
        (outputs,) = executable.execute([client.buffer_from_numpy(A)])
        np.testing.assert_array_equal(outputs[0].to_numpy(), A + A)
    assert counters.delta()["compiles"] == 0 and counters.delta()["cache_hits"] == 1, counters.delta()
    assert len(entry_names(cache_dir)) == 1


PRECOMPILE_SUMMARY = re.compile(r"pjrt-neuron precompile: (\d+) program\(s\): (\d+) compiled, (\d+) already in the "
                                r"cache, (\d+) failed")


@uses("precompile")
def test_precompile_then_the_run_compiles_nothing(chains):
    got = chains["precompile"].result()
    precompile, normal = got["precompile"], got["normal"]
    assert precompile.returncode == 0, precompile.describe()
    match = PRECOMPILE_SUMMARY.search(precompile.stdout)
    assert match, precompile.describe()
    programs, compiled, cached, failed = map(int, match.groups())
    assert programs >= 2 and compiled == programs and cached == 0 and failed == 0, match.group(0)
    assert "GRAPH COLLECTION MODE" in precompile.stderr
    assert len(got["entries"]) == programs
    # The normal run: 2 epochs do not reach the example's accuracy bar, so exit 1 is allowed;
    # what matters is that it trained and loaded every program.
    assert normal.returncode in (0, 1) and "test accuracy:" in normal.stdout, normal.describe()
    losses = [float(x) for x in re.findall(r"loss ([0-9.]+)", normal.stdout)]
    assert len(losses) == 2 and losses[1] < losses[0] < 3.0, normal.stdout
    [metrics] = metrics_lines(normal.stderr)
    assert metrics["compiles"] == 0 and metrics["cache_misses"] == 0, metrics
    assert metrics["cache_hits"] == programs, metrics
    assert got["entries_after_run"] == got["entries"]
