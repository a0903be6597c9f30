"""Trainium compatibility diagnostics: plugin/src/core/compat.cc, PJRT_NEURON_COMPAT*, `pjrt-neuron check`.

Every program runs in a subprocess of its own (the settings are read from the environment, and
torch-xla picks its device once per process), from the small scripts in tests/compat_programs/.
The line each finding must point at is marked there `# case: <name>`; lines marked
`# clean: <name>` must produce no finding. The subprocesses the selected tests need are started
together up front on a small pool, as in test_torch_xla.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import job_pool
import pjrt_neuron.config as config
from job_pool import Job, JobPool, uses, wanted_jobs

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = REPO / "tests" / "compat_programs"
TIMEOUT = 300

JAX_CONSTRUCTS = PROGRAMS / "jax_constructs.py"
JAX_MODES = PROGRAMS / "jax_modes.py"
JAX_MLP = PROGRAMS / "jax_mlp.py"
JAX_RANDOM = PROGRAMS / "jax_random.py"
TORCH_CONSTRUCTS = PROGRAMS / "torch_constructs.py"
TORCH_MLP = PROGRAMS / "torch_mlp.py"

# Settings that would change what a subprocess does if inherited from the caller.
_SCRUBBED = (
    "PJRT_DEVICE", "CPU_NUM_DEVICES", "XLA_REGISTER_INSTALLED_PLUGINS", "NEURON_LIBRARY_PATH",
    "PJRT_NEURON_TORCH_PLUGIN", "PJRT_NEURON_INSTANCE_TYPE", "NEURON_RT_VISIBLE_CORES",
    "NEURON_RT_NUM_CORES", "JAX_PLATFORMS", "PJRT_DYNAMIC_PLUGINS", "JAX_ENABLE_X64",
    "XLA_USE_SPMD", "XLA_USE_32BIT_LONG", "XLA_USE_BF16", "XLA_DOWNCAST_BF16", "XLA_EXPERIMENTAL",
    "XLA_IR_DEBUG", "XLA_HLO_DEBUG",
    "PJRT_NEURON_COMPAT", "PJRT_NEURON_COMPAT_STRICT_NUMERICS", "PJRT_NEURON_COMPAT_REPORT",
    "PJRT_NEURON_SIM_ENGINE",
)
NEWER_ENGINE = "lammps-jax-pjrt-cpu"  # the engine-jax extra's build (README, "Engine builds")

WARNING = "pjrt-neuron: Trainium incompatibility: "
NUMERIC_WARNING = "pjrt-neuron: Trainium numeric difference: "


# ---------------------------------------------------------------- source lines


def marked_lines(path: Path) -> dict:
    """{name: line} for the `# case: name` / `# clean: name` markers of a program file."""
    lines = {}
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        m = re.search(r"# (?:case|clean): ([\w-]+)$", text)
        if m:
            assert m.group(1) not in lines, f"{path.name}: marker {m.group(1)} twice"
            lines[m.group(1)] = number
    return lines


def line_of(path: Path, name: str) -> int:
    return marked_lines(path)[name]


# ---------------------------------------------------------------- subprocesses


def _env(platform: str, **settings) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    if platform == "jax":
        env["JAX_PLATFORMS"] = "neuron"
    else:
        env["PJRT_DEVICE"] = "NEURON"
    # Jobs run side by side, each on its own simulated instance: NeuronCores are exclusive.
    env["PJRT_NEURON_LOCK_DIR"] = tempfile.mkdtemp(prefix="pjrt-neuron-compat-locks-")
    # And each with a compile cache of its own, so every job analyses freshly compiled programs.
    env["NEURON_COMPILE_CACHE_URL"] = tempfile.mkdtemp(prefix="pjrt-neuron-compat-cache-")
    env.update({k: v for k, v in settings.items() if v is not None})
    return env


def _check(*args, script: Path, script_args=(), platform="jax", **settings) -> Job:
    """`pjrt-neuron check [args] -- python script [script_args]`."""
    argv = [sys.executable, "-m", "pjrt_neuron", "check", *args, "--", sys.executable, str(script), *script_args]
    return Job(argv, _env(platform, **settings))


def _direct(*script_args, **settings) -> Job:
    """jax_modes.py run directly, its findings appended to a report file of its own."""
    report = os.path.join(tempfile.mkdtemp(prefix="pjrt-neuron-compat-report-"), "findings.jsonl")
    env = _env("jax", PJRT_NEURON_COMPAT_REPORT=report, **settings)
    return Job([sys.executable, str(JAX_MODES), *script_args], env, data=report)


def _jobs() -> dict:
    return {
        # Longest first, so the pool finishes sooner.
        "torch_constructs": _check("--json", script=TORCH_CONSTRUCTS, platform="torch",
                                   script_args=["int64", "float64", "complex", "dynamic"],
                                   # torch.nonzero gets a bounded dynamic shape only when asked.
                                   XLA_EXPERIMENTAL="nonzero"),
        "torch_mlp": _check("--json", script=TORCH_MLP, platform="torch"),
        "jax_constructs": _check("--json", script=JAX_CONSTRUCTS),
        "jax_mlp": _check(script=JAX_MLP),
        "jax_random": _check("--json", script=JAX_RANDOM),
        "jax_int64_json": _check("--json", script=JAX_MODES, script_args=["int64", "int64-large"]),
        "jax_int64_exit3": _check(script=JAX_MODES, script_args=["int64", "--exit", "3"]),
        "jax_float64_text": _check(script=JAX_MODES,
                                   script_args=["float64", "float64-again", "int64", "clean", "--exit", "3"]),
        "jax_check_strict": _check("--strict", "--json", script=JAX_MODES, script_args=["float64", "clean"]),
        "warn_default": _direct("float64", "float64-again"),
        "jax_constructs_newer_engine": _check("--json", script=JAX_CONSTRUCTS, PJRT_NEURON_SIM_ENGINE=NEWER_ENGINE),
        "warn_default_newer_engine": _direct("float64", "float64-again", PJRT_NEURON_SIM_ENGINE=NEWER_ENGINE),
        "strict": _direct("float64", "clean", "int64", "int64-large", PJRT_NEURON_COMPAT="strict"),
        "warn_int64": _direct("int64", "int64-large"),
        "warn_numerics": _direct("int64", PJRT_NEURON_COMPAT_STRICT_NUMERICS="1"),
        # Run directly, torch-xla records no source locations (check asks for them).
        "torch_direct": Job([sys.executable, str(PROGRAMS / "torch_constructs.py"), "complex"], _env("torch")),
        "strict_numerics": _direct("int64", "clean", PJRT_NEURON_COMPAT="strict",
                                   PJRT_NEURON_COMPAT_STRICT_NUMERICS="1"),
        "off": _direct("float64", "int64", PJRT_NEURON_COMPAT="off"),
        "invalid": _direct("clean", PJRT_NEURON_COMPAT="loud"),
    }


@dataclass
class Result(job_pool.Result):
    report: str | None = None  # PJRT_NEURON_COMPAT_REPORT of a direct run (the job's data)

    def results(self) -> dict:
        """The `RESULT {json}` lines the program printed, by case (or torch program) name."""
        out = {}
        for line in self.stdout.splitlines():
            if line.startswith("RESULT "):
                r = json.loads(line[len("RESULT "):])
                out[r.get("case", r.get("program"))] = r
        return out

    def report_json(self) -> dict:
        """The JSON report of `pjrt-neuron check --json` (the program's own RESULT lines aside)."""
        text = "\n".join(l for l in self.stdout.splitlines() if not l.startswith("RESULT "))
        start = text.find("{\n")
        assert start >= 0, self.describe()
        return json.loads(text[start:])

    def text_report(self) -> list:
        """The lines of `pjrt-neuron check`'s text report."""
        lines = self.stdout.splitlines()
        heads = [i for i, l in enumerate(lines) if l.startswith("pjrt-neuron check:")]
        assert len(heads) == 1, self.describe()
        return lines[heads[0]:]

    def report_records(self) -> list:
        """The lines a direct run appended to PJRT_NEURON_COMPAT_REPORT (none if no file)."""
        if not os.path.exists(self.report):
            return []
        with open(self.report) as f:
            return [json.loads(line) for line in f if line.strip()]

    def warnings(self, prefix=WARNING) -> list:
        return [l for l in self.stderr.splitlines() if l.startswith(prefix)]


def _run(name: str, job: Job) -> Result:
    return Result(**vars(job_pool.run(name, job, REPO, TIMEOUT)), report=job.data)


@pytest.fixture(scope="module")
def runs(request):
    """Starts every subprocess that the selected tests of this module read, all at once."""
    # Two cores: three workers keep both busy while a process waits on start-up or I/O.
    with JobPool(_jobs(), wanted_jobs(request), workers=3, run=_run) as pool:
        yield pool


def findings_at(report: dict, path: Path, line: int) -> list:
    return [f for f in report["findings"] if f["source_file"] == str(path) and f["source_line"] == line]


def only_finding_at(run: Result, path: Path, name: str) -> dict:
    line = line_of(path, name)
    found = findings_at(run.report_json(), path, line)
    assert len(found) == 1, f"{path.name}:{line} ({name}): {found}\n{run.describe()}"
    return found[0]


# ---------------------------------------------------------------- JAX constructs

# (case marker in jax_constructs.py, check id, a part of the op name)
JAX_FAILING = [
    ("complex", "complex", "jit(complex_multiply)/"),
    ("fp8-e4m3fnuz", "fp8-format", "jit(fp8_e4m3fnuz)/convert_element_type"),
    ("fp8-e5m2fnuz", "fp8-format", "jit(fp8_e5m2fnuz)/convert_element_type"),
    ("fp8-e4m3b11fnuz", "fp8-format", "jit(fp8_e4m3b11fnuz)/convert_element_type"),
    ("fp8-e3m4", "fp8-format", "jit(fp8_e3m4)/convert_element_type"),
    ("fp8-e8m0fnu", "fp8-format", "jit(fp8_e8m0fnu)/convert_element_type"),
    ("cond", "cond", "jit(data_dependent_cond)/cond"),
    ("while", "data-dependent-while", "jit(data_dependent_while)/while"),
    ("integer-dot", "integer-dot", "jit(integer_matmul)/dot_general"),
    ("argmax", "variadic-reduce", "jit(argmax)/"),
    # lax.sort with two keys compares the first key with EQ (lexicographic order): the compiled
    # comparator is `or(lt(k0), and(eq(k0), lt(k1)))`.
    ("sort-two-keys", "sort-comparator", "jit(two_key_sort)/"),
]
JAX_CLEAN = ["fp8-e4m3fn", "fp8-e5m2", "fori", "sort"]


@uses("jax_constructs")
@pytest.mark.parametrize("case,check,op", JAX_FAILING, ids=[c[0] for c in JAX_FAILING])
def test_jax_construct_is_found_at_its_line(runs, case, check, op):
    run = runs["jax_constructs"]
    result = run.results()[case]
    assert result["ok"], result  # warn mode: the program still compiles and runs
    f = only_finding_at(run, JAX_CONSTRUCTS, case)
    assert f["check"] == check, f
    assert f["fails_on_trainium"] is True
    assert any(op in name for name in f["op_names"]), f
    assert f["programs"] == 1 and f["instructions"] >= 1, f
    assert f["what"] and f["why"] and f["fix"], f


@uses("jax_constructs")
@pytest.mark.parametrize("case", JAX_CLEAN)
def test_jax_supported_construct_is_not_reported(runs, case):
    run = runs["jax_constructs"]
    result = run.results()[case]
    assert result["ok"], result
    line = line_of(JAX_CONSTRUCTS, case)
    assert findings_at(run.report_json(), JAX_CONSTRUCTS, line) == [], run.describe()


@uses("jax_constructs")
def test_jax_fixed_trip_count_loop_is_a_real_loop(runs):
    # The fori_loop must reach the analysis as an HLO while (not unrolled), else its clean
    # result above would prove nothing; the data-dependent loop too.
    results = runs["jax_constructs"].results()
    assert results["fori"]["compiled_has_while"] is True
    assert results["while"]["compiled_has_while"] is True


@uses("jax_constructs")
def test_jax_constructs_still_run_correctly_in_warn_mode(runs):
    results = runs["jax_constructs"].results()
    assert results["complex"]["value"] == [1.0, 2.0, 3.0, 4.0]
    assert results["cond"]["value"] == [2.0, 3.0, 4.0, 5.0]  # sum > 0: the first branch
    assert results["while"]["value"] == [16.0, 32.0, 48.0, 64.0]
    assert results["integer-dot"]["value"] == [[11.0, 4.0], [8.0, 3.0]]
    assert results["argmax"]["value"] == 3.0
    assert results["sort-two-keys"]["value"] == results["sort"]["value"] == [1.0, 1.0, 2.0, 3.0]


@uses("jax_constructs")
def test_jax_constructs_report_exactly_the_marked_lines(runs):
    run = runs["jax_constructs"]
    report = run.report_json()
    expected = {(check, line_of(JAX_CONSTRUCTS, case)) for case, check, _ in JAX_FAILING}
    got = {(f["check"], f["source_line"]) for f in report["findings"]}
    assert got == expected, report
    assert all(f["source_file"] == str(JAX_CONSTRUCTS) for f in report["findings"]), report
    assert report["would_fail_on_trainium"] is True
    assert report["script_exit_code"] == 0
    assert run.returncode == 1, run.describe()


@uses("jax_constructs", "jax_constructs_newer_engine")
def test_jax_constructs_are_found_at_the_same_lines_on_the_newer_engine(runs):
    # Newer XLA keeps source locations in the module's stack frame index, not in each op.
    assert config.engine_builds()[NEWER_ENGINE] is not None, "pip install '.[engine-jax]'"
    older, newer = runs["jax_constructs"], runs["jax_constructs_newer_engine"]
    results = newer.results()
    assert all(results[case]["ok"] for case in [c[0] for c in JAX_FAILING] + JAX_CLEAN), newer.stdout
    key = lambda f: (f["check"], f["source_file"], f["source_line"], f["fails_on_trainium"])  # noqa: E731
    assert sorted(map(key, newer.report_json()["findings"])) == sorted(map(key, older.report_json()["findings"]))
    assert newer.returncode == 1, newer.describe()


@uses("warn_default_newer_engine")
def test_report_lines_name_the_engine_build_that_compiled(runs):
    run = runs["warn_default_newer_engine"]
    assert run.returncode == 0, run.describe()
    records = run.report_records()
    assert [(r["program"], r["check"], r["source_file"], r["source_line"]) for r in records] == [
        ("jit_scale64", "float64", str(JAX_MODES), line_of(JAX_MODES, "float64"))] * 2
    assert all(r["engine"].startswith("XLA CPU (PJRT 0.") and r["engine"].endswith(", pjrt_c_api_cpu_plugin.so)")
               for r in records), records


@uses("jax_constructs")
def test_jax_refuses_host_callbacks_on_neuron(runs):
    # The host-callback check cannot be reached from JAX here: JAX lowers Python callbacks only
    # for cpu/cuda/rocm/tpu and refuses for platform 'neuron' before anything is compiled.
    results = runs["jax_constructs"].results()
    assert results["callback"]["ok"] is False
    assert results["callback"]["type"] == "ValueError"
    assert "`EmitPythonCallback` not supported on neuron backend" in results["callback"]["error"]
    assert results["debug-callback"]["ok"] is False
    assert results["debug-callback"]["type"] == "NotImplementedError"
    assert "'debug_callback' not found for platform neuron" in results["debug-callback"]["error"]
    report = runs["jax_constructs"].report_json()
    assert not [f for f in report["findings"] if f["check"] == "host-callback"]


# No JAX test of the dynamic-shape check: jax.jit traces static shapes only, so JAX emits no HLO
# with dynamic dimensions (is_dynamic_dimension); the check is covered with torch-xla
# (torch.nonzero under XLA_EXPERIMENTAL=nonzero) instead.


@uses("jax_random")
def test_jax_random_with_x64_off_reports_no_int64(runs):
    # With jax_enable_x64 off no value the user made is 64-bit; JAX's threefry lowering counts
    # positions in uint64 internally, which narrowing cannot change below 2^32 elements, and
    # which the user can neither see nor avoid.
    run = runs["jax_random"]
    assert run.returncode == 0, run.describe()
    report = run.report_json()
    assert report["findings"] == [], report


# ---------------------------------------------------------------- int64 narrowing


@uses("jax_int64_json")
def test_jax_int64_is_a_numeric_difference_and_check_passes(runs):
    run = runs["jax_int64_json"]
    results = run.results()
    assert results["int64"] == {"case": "int64", "ok": True, "dtype": "int64", "correct": True,
                                "platform": "neuron"}
    assert results["int64-large"] == {"case": "int64-large", "ok": True, "dtype": "int64", "correct": True,
                                      "platform": "neuron"}
    report = run.report_json()
    assert report["would_fail_on_trainium"] is False
    assert report["script_exit_code"] == 0
    small, large = report["findings"]
    # check lists every int64 narrowing, and says where values leave the int32 range.
    assert (small["check"], small["source_file"], small["source_line"], small["beyond_int32"]) == (
        "int64-narrowed", str(JAX_MODES), line_of(JAX_MODES, "int64"), False)
    assert (large["check"], large["source_file"], large["source_line"], large["beyond_int32"]) == (
        "int64-narrowed", str(JAX_MODES), line_of(JAX_MODES, "int64-large"), True)
    for f in (small, large):
        assert f["fails_on_trainium"] is False
        assert "int32" in f["why"] and "2^31" in f["why"]
    assert small["op_names"] == ["jit(widen)/convert_element_type"]
    assert run.returncode == 0, run.describe()
    # Only the values that can wrap are worth a line on stderr; it says numbers change, not fail.
    assert run.warnings() == []
    [warning] = run.warnings(NUMERIC_WARNING)
    assert f"int64 values leaving the int32 range at {JAX_MODES}:{line_of(JAX_MODES, 'int64-large')}" in warning


@uses("warn_int64")
def test_int64_within_int32_is_quiet_by_default(runs):
    run = runs["warn_int64"]
    results = run.results()
    assert results["int64"]["ok"] and results["int64"]["correct"], results
    assert results["int64-large"]["ok"] and results["int64-large"]["correct"], results
    [warning] = run.warnings(NUMERIC_WARNING)
    assert f"{JAX_MODES}:{line_of(JAX_MODES, 'int64-large')}" in warning
    assert f"{JAX_MODES}:{line_of(JAX_MODES, 'int64')} " not in run.stderr
    # The report file still gets both.
    records = [(r["source_line"], r["beyond_int32"]) for r in run.report_records()]
    assert records == [(line_of(JAX_MODES, "int64"), False), (line_of(JAX_MODES, "int64-large"), True)]
    assert run.returncode == 0, run.describe()


@uses("warn_numerics")
def test_strict_numerics_setting_warns_for_every_int64(runs):
    run = runs["warn_numerics"]
    assert run.results()["int64"]["correct"] is True
    [warning] = run.warnings(NUMERIC_WARNING)
    assert f"int64 values at {JAX_MODES}:{line_of(JAX_MODES, 'int64')}" in warning
    assert run.returncode == 0, run.describe()


@uses("torch_direct")
def test_finding_without_location_says_how_to_get_one(runs):
    run = runs["torch_direct"]
    assert run.results()["complex"]["ok"] is True, run.describe()
    warnings = run.warnings()
    assert warnings, run.describe()
    for warning in warnings:
        assert "complex numbers at" in warning, warning
        assert "(no source location; torch-xla records one with XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1" in warning


# ---------------------------------------------------------------- torch-xla


@uses("torch_constructs")
@pytest.mark.parametrize("case", ["torch-arange", "torch-long-arithmetic"])
def test_torch_int64_is_narrowed_at_its_line(runs, case):
    run = runs["torch_constructs"]
    result = run.results()["int64"]
    assert result == {"program": "int64", "ok": True, "dtype": "torch.int64",
                      "values": [1, 4, 7, 10, 13, 16, 19, 22, 25, 28]}
    f = only_finding_at(run, PROGRAMS / "torch_int64.py", case)
    assert f["check"] == "int64-narrowed"
    assert f["fails_on_trainium"] is False
    assert f["programs"] == 1 and f["instructions"] >= 1


@uses("torch_constructs")
def test_torch_float64_reaches_the_plugin_as_float32(runs):
    # torch-xla maps float64 to float32 on NEURON devices itself (as on TPU), so the HLO the
    # plugin gets has no f64 and there is nothing to report; the tensor still says float64.
    run = runs["torch_constructs"]
    result = run.results()["float64"]
    assert result["ok"], result
    assert result["dtype"] == "torch.float64"
    assert result["values"] == [2.5, 2.5, 2.5, 2.5]
    assert result["hlo_has_f64"] is False and result["hlo_has_f32"] is True
    report = run.report_json()
    assert [f for f in report["findings"] if f["check"] == "float64"] == []
    assert [f for f in report["findings"] if f["source_file"].endswith("torch_float64.py")] == []


@uses("torch_constructs")
@pytest.mark.parametrize("case", ["torch-complex-ones", "torch-complex-multiply"])
def test_torch_complex_is_found_at_its_line(runs, case):
    run = runs["torch_constructs"]
    result = run.results()["complex"]
    assert result == {"program": "complex", "ok": True, "dtype": "torch.complex64",
                      "real": [1.0] * 4, "imag": [2.0] * 4}
    f = only_finding_at(run, PROGRAMS / "torch_complex.py", case)
    assert f["check"] == "complex"
    assert f["fails_on_trainium"] is True


@uses("torch_constructs")
def test_torch_dynamic_shape_is_found_at_its_line(runs):
    run = runs["torch_constructs"]
    result = run.results()["dynamic"]
    assert result["ok"], result
    assert result["shape"] == "torch.Size([<=4, 1])"  # bounded dynamic
    f = only_finding_at(run, PROGRAMS / "torch_dynamic.py", "torch-nonzero")
    assert f["check"] == "dynamic-shape"
    assert f["fails_on_trainium"] is True
    assert f["op_names"] == ["aten__nonzero"]


@uses("torch_constructs")
def test_torch_constructs_report_nothing_else(runs):
    run = runs["torch_constructs"]
    report = run.report_json()
    expected = {
        ("torch_int64.py", line_of(PROGRAMS / "torch_int64.py", "torch-arange"), "int64-narrowed"),
        ("torch_int64.py", line_of(PROGRAMS / "torch_int64.py", "torch-long-arithmetic"), "int64-narrowed"),
        ("torch_complex.py", line_of(PROGRAMS / "torch_complex.py", "torch-complex-ones"), "complex"),
        ("torch_complex.py", line_of(PROGRAMS / "torch_complex.py", "torch-complex-multiply"), "complex"),
        ("torch_dynamic.py", line_of(PROGRAMS / "torch_dynamic.py", "torch-nonzero"), "dynamic-shape"),
    }
    got = {(Path(f["source_file"]).name, f["source_line"], f["check"]) for f in report["findings"]}
    assert got == expected, report
    assert all(Path(f["source_file"]).parent == PROGRAMS for f in report["findings"]), report
    assert report["would_fail_on_trainium"] is True
    assert report["script_exit_code"] == 0
    assert run.returncode == 1, run.describe()


# ---------------------------------------------------------------- clean programs


@uses("jax_mlp")
def test_jax_float32_mlp_has_no_finding(runs):
    run = runs["jax_mlp"]
    assert run.returncode == 0, run.describe()
    assert "losses" in run.stdout
    assert run.text_report() == ["pjrt-neuron check: no Trainium incompatibilities found."]
    assert run.warnings() == [] and run.warnings(NUMERIC_WARNING) == []


@uses("torch_mlp")
def test_torch_float32_mlp_has_no_finding(runs):
    run = runs["torch_mlp"]
    assert run.returncode == 0, run.describe()
    assert "losses" in run.stdout
    assert run.report_json() == {"script_exit_code": 0, "would_fail_on_trainium": False, "findings": []}
    assert run.warnings() == [] and run.warnings(NUMERIC_WARNING) == []


# ---------------------------------------------------------------- modes


@uses("strict")
def test_strict_fails_the_compile_with_the_finding(runs):
    run = runs["strict"]
    result = run.results()["float64"]
    assert result["ok"] is False, result
    assert result["type"] in ("JaxRuntimeError", "XlaRuntimeError"), result
    error = result["error"]
    assert error.startswith("INVALID_ARGUMENT: "), error
    assert "PJRT_Client_Compile" in error
    assert "'jit_scale64' would not compile for Trainium (PJRT_NEURON_COMPAT=strict)" in error
    location = f"{JAX_MODES}:{line_of(JAX_MODES, 'float64')}"
    assert f"float64 values at {location} (jit(scale64)/convert_element_type)" in error
    assert "neuronx-cc does not support float64" in error
    # A failing finding is in the error, not logged a second time as a warning.
    assert run.warnings() == [], run.stderr
    # The findings still reach the report file, the failing and the numeric one.
    records = [(r["program"], r["check"], r["source_line"], r["fails_on_trainium"]) for r in run.report_records()]
    assert records == [
        ("jit_scale64", "float64", line_of(JAX_MODES, "float64"), True),
        ("jit_widen", "int64-narrowed", line_of(JAX_MODES, "int64"), False),
        ("jit_widen_large", "int64-narrowed", line_of(JAX_MODES, "int64-large"), False)]


@uses("strict")
def test_strict_client_stays_usable_after_a_rejected_compile(runs):
    results = runs["strict"].results()
    assert results["clean"] == {"case": "clean", "ok": True, "dtype": "float32", "correct": True,
                                "platform": "neuron"}


@uses("strict")
def test_strict_lets_int64_compile_with_a_warning_where_it_can_wrap(runs):
    run = runs["strict"]
    for case in ("int64", "int64-large"):
        assert run.results()[case]["ok"] is True
        assert run.results()[case]["correct"] is True
    [warning] = run.warnings(NUMERIC_WARNING)
    assert f"{JAX_MODES}:{line_of(JAX_MODES, 'int64-large')}" in warning
    assert run.returncode == 0, run.describe()


@uses("strict_numerics")
def test_strict_numerics_fails_int64_too(runs):
    run = runs["strict_numerics"]
    result = run.results()["int64"]
    assert result["ok"] is False, result
    assert result["type"] in ("JaxRuntimeError", "XlaRuntimeError"), result
    assert result["error"].startswith("INVALID_ARGUMENT: "), result
    assert "'jit_widen' would not compile for Trainium" in result["error"]
    assert f"int64 values at {JAX_MODES}:{line_of(JAX_MODES, 'int64')}" in result["error"]
    assert run.results()["clean"]["ok"] is True and run.results()["clean"]["correct"] is True
    assert run.warnings(NUMERIC_WARNING) == []


@uses("off")
def test_off_reports_nothing(runs):
    run = runs["off"]
    results = run.results()
    assert results["float64"]["ok"] and results["float64"]["correct"], results
    assert results["int64"]["ok"] and results["int64"]["correct"], results
    assert "pjrt-neuron: Trainium" not in run.stderr
    assert not os.path.exists(run.report), "PJRT_NEURON_COMPAT=off wrote a report"
    assert run.returncode == 0, run.describe()


@uses("invalid")
def test_invalid_mode_fails_the_compile_naming_the_variable(runs):
    run = runs["invalid"]
    result = run.results()["clean"]
    assert result["ok"] is False, result
    assert result["error"].startswith("INVALID_ARGUMENT: "), result
    assert "PJRT_NEURON_COMPAT='loud'" in result["error"]
    assert "warn" in result["error"] and "strict" in result["error"] and "off" in result["error"]


@uses("warn_default")
def test_warn_is_the_default_and_logs_each_finding_once(runs):
    # The same function at two shapes: two programs, one source line.
    run = runs["warn_default"]
    assert run.returncode == 0, run.describe()
    assert all(r["ok"] and r["correct"] for r in run.results().values()), run.stdout
    location = f"{JAX_MODES}:{line_of(JAX_MODES, 'float64')}"
    assert run.warnings() == [
        f"{WARNING}float64 values at {location} (jit(scale64)/convert_element_type): "
        "neuronx-cc does not support float64; use float32 (or bfloat16); keep jax_enable_x64 off"]
    # The report file gets every program's findings, not only the first.
    records = run.report_records()
    assert [(r["program"], r["check"], r["source_line"]) for r in records] == [
        ("jit_scale64", "float64", line_of(JAX_MODES, "float64"))] * 2
    assert all(r["fails_on_trainium"] is True and r["count"] >= 1 for r in records)
    # The build JAX ran on (auto: the newer where installed), as the platform version names it.
    libraries = {Path(path).name for path in config.engine_builds().values() if path}
    assert all(any(r["engine"].endswith(f", {name})") for name in libraries) for r in records), records
    assert len({r["engine"] for r in records}) == 1, records


# ---------------------------------------------------------------- the check command


@uses("jax_float64_text", "warn_default")
def test_check_text_report_lines_and_counts(runs):
    run = runs["jax_float64_text"]
    f64_line, i64_line = line_of(JAX_MODES, "float64"), line_of(JAX_MODES, "int64")
    lines = run.text_report()
    assert lines[0] == "pjrt-neuron check: 1 finding(s) would fail on Trainium, 1 would change the numbers:"
    assert len(lines) == 3, lines
    # The same instructions the direct run reported, summed over its two programs.
    instructions = sum(r["count"] for r in runs["warn_default"].report_records())
    assert lines[1] == (
        f"FAIL   {JAX_MODES}:{f64_line}: float64 values [jit(scale64)/convert_element_type] — "
        f"in 2 program(s), {instructions} instruction(s). "
        "neuronx-cc does not support float64; use float32 (or bfloat16); keep jax_enable_x64 off.")
    assert re.fullmatch(
        rf"NUMBER {re.escape(str(JAX_MODES))}:{i64_line}: int64 values \[jit\(widen\)/convert_element_type\] — "
        r"in 1 program\(s\), [1-9]\d* instruction\(s\)\. neuronx-cc narrows int64 to int32 by default, "
        r"so values beyond 2\^31 wrap; use int32, or keep values within the int32 range\.", lines[2]), lines[2]
    # warn mode: the script ran to its end; a failing finding outranks its exit code 3.
    assert set(run.results()) == {"float64", "float64-again", "int64", "clean"}
    assert run.returncode == 1, run.describe()
    assert len(run.warnings()) == 1, run.stderr


@uses("jax_int64_exit3")
def test_check_passes_the_script_exit_code_when_nothing_would_fail(runs):
    run = runs["jax_int64_exit3"]
    assert run.returncode == 3, run.describe()
    lines = run.text_report()
    assert lines[0] == "pjrt-neuron check: 0 finding(s) would fail on Trainium, 1 would change the numbers:"
    assert lines[1].startswith(f"NUMBER {JAX_MODES}:{line_of(JAX_MODES, 'int64')}: int64 values"), lines


@uses("jax_check_strict")
def test_check_strict_fails_the_compile_and_still_reports(runs):
    run = runs["jax_check_strict"]
    results = run.results()
    assert results["float64"]["ok"] is False
    assert "would not compile for Trainium (PJRT_NEURON_COMPAT=strict)" in results["float64"]["error"]
    assert results["clean"]["ok"] is True and results["clean"]["correct"] is True
    report = run.report_json()
    assert report["script_exit_code"] == 0
    assert report["would_fail_on_trainium"] is True
    [f] = report["findings"]
    assert (f["check"], f["source_file"], f["source_line"], f["fails_on_trainium"]) == (
        "float64", str(JAX_MODES), line_of(JAX_MODES, "float64"), True)
    assert f["op_names"] == ["jit(scale64)/convert_element_type"]
    assert (f["programs"], f["what"]) == (1, "float64 values")
    assert run.returncode == 1, run.describe()


def test_check_without_a_command_is_a_usage_error():
    p = subprocess.run([sys.executable, "-m", "pjrt_neuron", "check", "--json", "--"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "give the command to run after --" in p.stderr
