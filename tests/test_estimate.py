"""`pjrt-neuron estimate` (pjrt_neuron/estimation/) on small JAX and torch-xla scripts
(tests/estimate_programs/), whose FLOPs and bytes are worked out by hand here; the native counts
themselves are tested in plugin/tests/unit/cost_analysis_test.cc. The subprocesses the selected
tests need start together up front on a small pool, as in test_compat.py.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

import job_pool
from job_pool import Job, JobPool, uses, wanted_jobs

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = REPO / "tests" / "estimate_programs"
TIMEOUT = 300

_SCRUBBED = (
    "PJRT_DEVICE", "CPU_NUM_DEVICES", "XLA_REGISTER_INSTALLED_PLUGINS", "NEURON_LIBRARY_PATH",
    "PJRT_NEURON_TORCH_PLUGIN", "PJRT_NEURON_INSTANCE_TYPE", "NEURON_RT_VISIBLE_CORES",
    "NEURON_RT_NUM_CORES", "JAX_PLATFORMS", "PJRT_DYNAMIC_PLUGINS", "JAX_ENABLE_X64", "XLA_USE_BF16",
    "PJRT_NEURON_ESTIMATE_REPORT", "NEURON_LOGICAL_NC_CONFIG",
)


def _env(platform: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    if platform == "jax":
        env["JAX_PLATFORMS"] = "neuron"
    else:
        env["PJRT_DEVICE"] = "NEURON"
    env["PJRT_NEURON_LOCK_DIR"] = tempfile.mkdtemp(prefix="pjrt-neuron-estimate-locks-")
    env["NEURON_COMPILE_CACHE_URL"] = tempfile.mkdtemp(prefix="pjrt-neuron-estimate-cache-")
    return env


def _estimate(*args, script: str, script_args=(), platform="jax", data=None) -> Job:
    argv = [sys.executable, "-m", "pjrt_neuron", "estimate", *args, "--", sys.executable, str(PROGRAMS / script),
            *script_args]
    return Job(argv, _env(platform), data=data)


TRACE = os.path.join(tempfile.mkdtemp(prefix="pjrt-neuron-estimate-trace-"), "step.json")
PLOT = os.path.join(os.path.dirname(TRACE), "roofline.png")


ALL = ("--instance", "trn1.2xlarge", "--instance", "trn1.32xlarge", "--instance", "trn2.48xlarge")


def _jobs() -> dict:
    return {
        # Longest first, so the pool finishes sooner.
        "torch_mlp": _estimate("--json", *ALL, script="torch_mlp.py", script_args=["4"], platform="torch"),
        "jax_mlp": _estimate("--json", *ALL, script="jax_mlp.py", script_args=["4"]),
        "jax_mlp_bf16": _estimate("--json", script="jax_mlp.py", script_args=["4", "bfloat16"]),
        "data_parallel_2": _estimate("--json", "--trace", TRACE, "--plot", PLOT, script="jax_data_parallel.py", script_args=["2"]),
        "data_parallel_1": _estimate("--json", script="jax_data_parallel.py", script_args=["1"]),
        "matmul_f32": _estimate("--json", *ALL, "--unit", "samples", "--per-step", "256", "--price",
                                "trn2.48xlarge=40", "--baseline-price", "4.10", "--baseline-throughput", "1800",
                                script="jax_matmul.py", script_args=["float32", "5"]),
        "matmul_f32_autocast": _estimate("--json", "--auto-cast", "matmult", script="jax_matmul.py",
                                         script_args=["float32", "5"]),
        "matmul_bf16": _estimate("--json", script="jax_matmul.py", script_args=["bfloat16", "5"]),
        "matmul_large": _estimate("--json", *ALL, script="jax_matmul.py",
                                  script_args=["float32", "5", "2048", "4096", "2048"]),
        "matmul_text": _estimate("--unit", "samples", "--per-step", "256", "--baseline-price", "4.10",
                                 "--baseline-throughput", "1800", script="jax_matmul.py",
                                 script_args=["float32", "2"]),
        "psum": _estimate("--json", script="jax_psum.py"),
        "psum_32": Job(_estimate("--json", script="jax_psum.py", script_args=["32"]).argv,
                       {**_env("jax"), "PJRT_NEURON_INSTANCE_TYPE": "trn1.32xlarge"}),
        "block": Job([sys.executable, str(PROGRAMS / "jax_block.py")], _env("jax")),
        "at_exit": Job([sys.executable, str(PROGRAMS / "jax_matmul.py"), "float32", "2"],
                       {**_env("jax"), "PJRT_NEURON_ESTIMATE": "1"}),
        "fails": _estimate("--json", script="fails.py"),
    }


@pytest.fixture(scope="module")
def runs(request):
    with JobPool(_jobs(), wanted_jobs(request),
                 workers=3, run=lambda name, job: job_pool.run(name, job, REPO, TIMEOUT)) as pool:
        yield pool


def report(result) -> dict:
    text = result.stdout
    start = text.find("{\n")
    assert start >= 0, result.describe()
    return json.loads(text[start:])


def on(report_json: dict, instance: str) -> dict:
    return next(r for r in report_json["instances"] if r["instance_type"] == instance)


def program(estimate: dict, name: str) -> dict:
    found = [p for p in estimate["programs"] if p["program"] == name]
    assert len(found) == 1, estimate["programs"]
    return found[0]


M, K, N = 256, 512, 128


# ---------------------------------------------------------------- counts of known programs


@uses("matmul_f32")
def test_a_float32_matmul_is_counted_exactly(runs):
    r = report(runs["matmul_f32"].ok())
    assert r["estimate"] is True and r["model"]
    est = on(r, "trn1.2xlarge")
    p = program(est, "jit__lambda")
    assert p["executions"] == 5
    assert p["matmul_flops"] == {"fp32": 2 * M * K * N}
    assert p["hbm_bytes"] == (M * K + K * N + M * N) * 4
    assert p["in_step"] and est["steps"] == 5
    assert est["model_flops_per_step"] == 2 * M * K * N


@uses("matmul_bf16")
def test_a_bfloat16_matmul_is_counted_at_the_bfloat16_rate(runs):
    p = program(on(report(runs["matmul_bf16"].ok()), "trn1.2xlarge"), "jit__lambda")
    assert p["matmul_flops"] == {"bf16": 2 * M * K * N}
    assert p["hbm_bytes"] == (M * K + K * N + M * N) * 2


@uses("psum")
def test_an_all_reduce_over_two_cores_sends_its_operand_twice_over(runs):
    est = report(runs["psum"].ok())["instances"][0]
    (p,) = [p for p in est["programs"] if p["collectives"]]
    assert p["collectives"] == [{"kind": "all-reduce", "bytes": 1024 * 4, "group_size": p["collectives"][0]
                                 ["group_size"], "count": 1}]
    assert p["collectives"][0]["group_size"] in (0, 2)
    assert p["cores"] == [0, 1] and p["executions"] == 3
    # A ring all-reduce over n sends 2 (n - 1) / n of the data: 4096 bytes for n = 2.
    assert p["link_bytes"] == 4096
    assert p["parts_seconds"]["collectives"] > 0


@uses("psum", "psum_32")
def test_an_all_reduce_over_32_cores_crosses_the_chip_links(runs):
    two = report(runs["psum"].ok())["instances"][0]
    est = report(runs["psum_32"].ok())["instances"][0]
    assert est["instance_type"] == "trn1.32xlarge" and est["cores_used"] == 32
    (p,) = [p for p in est["programs"] if p["collectives"]]
    assert p["cores"] == list(range(32))
    assert [(c["kind"], c["bytes"]) for c in p["collectives"]] == [("all-reduce", 4096)]
    assert p["collectives"][0]["group_size"] in (0, 32)
    assert p["link_bytes"] == pytest.approx(2 * 31 / 32 * 4096)
    # 32 cores span 16 chips: the ring runs over NeuronLink, with 62 steps instead of 2.
    (p2,) = [p for p in two["programs"] if p["collectives"]]
    assert p["parts_seconds"]["collectives"] > 10 * p2["parts_seconds"]["collectives"]


# ---------------------------------------------------------------- the estimate responds


@uses("matmul_f32", "matmul_large")
def test_a_larger_matmul_takes_longer_and_becomes_compute_bound(runs):
    small = on(report(runs["matmul_f32"].ok()), "trn1.2xlarge")
    large = on(report(runs["matmul_large"].ok()), "trn1.2xlarge")
    assert program(large, "jit__lambda")["matmul_flops"] == {"fp32": 2 * 2048 * 4096 * 2048}
    assert large["step_seconds"] > 10 * small["step_seconds"]
    assert program(large, "jit__lambda")["bound"] == "compute"


@uses("matmul_large", "matmul_f32_autocast")
def test_trn2_is_faster_than_trn1_on_compute_bound_work(runs):
    large = report(runs["matmul_large"].ok())
    assert on(large, "trn2.48xlarge")["step_seconds"] < on(large, "trn1.2xlarge")["step_seconds"]
    # One trn1 core computes FP32 at 47.5 / 2 TFLOPS on full tiles; the TensorEngine's time is the
    # product's cycles at that clock, over the share of peak the compiler's schedule sustains.
    from pjrt_neuron import estimator_model

    p = program(on(large, "trn1.2xlarge"), "jit__lambda")
    clock = 47.5e12 / 2 / (2 * 128 * 128)
    assert p["parts_seconds"]["compute"] == pytest.approx(
        estimator_model.matmul_cycles(2048, 4096, 2048) / clock / estimator_model.constant("pe_sustained_fraction"))


@uses("matmul_f32", "matmul_f32_autocast", "matmul_bf16")
def test_bfloat16_and_auto_cast_run_matmuls_at_four_times_the_float32_rate(runs):
    f32 = program(on(report(runs["matmul_f32"].ok()), "trn1.2xlarge"), "jit__lambda")
    cast = program(report(runs["matmul_f32_autocast"].ok())["instances"][0], "jit__lambda")
    bf16 = program(report(runs["matmul_bf16"].ok())["instances"][0], "jit__lambda")
    assert f32["parts_seconds"]["compute"] == pytest.approx(4 * cast["parts_seconds"]["compute"])
    assert bf16["parts_seconds"]["compute"] == pytest.approx(cast["parts_seconds"]["compute"])
    assert bf16["parts_seconds"]["memory"] == pytest.approx(f32["parts_seconds"]["memory"] / 2)


@uses("data_parallel_1", "data_parallel_2")
def test_adding_cores_to_a_data_parallel_job_shortens_the_step_and_all_reduces_the_gradients(runs):
    one = report(runs["data_parallel_1"].ok())["instances"][0]
    two = report(runs["data_parallel_2"].ok())["instances"][0]
    assert one["cores_used"] == 1 and two["cores_used"] == 2
    # The same work in total, half of it on each core.
    assert two["model_flops_per_step"] == one["model_flops_per_step"]
    assert two["step_seconds"] < one["step_seconds"]
    (step,) = [p for p in two["programs"] if p["in_step"] and sum(p["matmul_flops"].values()) > 0]
    assert step["cores"] == [0, 1]
    gradient_bytes = 2 * 512 * 512 * 4
    assert sum(c["bytes"] * c["count"] for c in step["collectives"] if c["kind"] == "all-reduce") == gradient_bytes
    assert not [p for p in one["programs"] if p["collectives"]]


@uses("data_parallel_2")
def test_the_trace_has_a_track_per_core_and_draws_the_collectives_across_them(runs):
    runs["data_parallel_2"].ok()
    with open(TRACE) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    assert trace["otherData"]["estimate"] is True
    tracks = {e["tid"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert tracks == {0, 1}
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") != "host"]
    assert {e["tid"] for e in spans} == {0, 1}
    assert all(e["dur"] > 0 and e["cat"] in ("compute", "memory", "collectives", "launch") for e in spans)
    flows = [e for e in events if e.get("cat") == "collective"]
    assert {e["ph"] for e in flows} == {"s", "f"} and {e["tid"] for e in flows} == {0, 1}
    assert {e["name"] for e in flows} == {"all-reduce"}
    # The host time between the previous step's end and this one's start, as the simulator measured it.
    gaps = [e for e in events if e.get("cat") == "host"]
    assert {e["tid"] for e in gaps} == {0, 1} and all(e["args"]["measured_us"] > 0 for e in gaps)


@uses("data_parallel_2")
def test_the_plot_draws_every_program_that_did_work_on_the_roofline(runs):
    from pjrt_neuron import roofline_plot

    result = report(runs["data_parallel_2"].ok())["instances"][0]
    with open(PLOT, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    points = roofline_plot.roofline_points(result)
    worked = [p for p in result["programs"] if p["executions"] and sum(p["matmul_flops"].values())]
    assert worked and {p["program"] for p in worked} <= {p["program"] for p in points}
    for p in points:
        program = next(q for q in result["programs"] if q["program"] == p["program"])
        operations = sum(program["matmul_flops"].values()) + program["vector_ops"] + program["transcendental_ops"]
        assert p["intensity"] == pytest.approx(operations / program["hbm_bytes"])
        assert p["ops_per_second"] == pytest.approx(operations / program["seconds"])


def test_the_plot_without_matplotlib_says_what_to_install(monkeypatch):
    from pjrt_neuron import roofline_plot

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(roofline_plot.PlotUnavailable, match=r"pip install 'pjrt-neuron\[plot\]'"):
        roofline_plot.require_matplotlib()


# ---------------------------------------------------------------- throughput and cost


@uses("matmul_f32")
def test_cost_per_million_units_follows_the_price_and_the_baseline(runs):
    r = report(runs["matmul_f32"].ok())
    trn1 = on(r, "trn1.2xlarge")
    assert trn1["price_per_hour"] == pytest.approx(1.34)
    # One copy of the one-core job on each of the instance's two cores, paid as one instance.
    assert trn1["deployment"]["copies"] == 2
    assert trn1["throughput_units_per_second"] == pytest.approx(2 * 256 / trn1["step_seconds"])
    assert trn1["cost_per_million_units"] == pytest.approx(1e6 / trn1["throughput_units_per_second"] * 1.34 / 3600)
    assert trn1["baseline_cost_per_million_units"] == pytest.approx(1e6 / 1800 * 4.10 / 3600)
    assert trn1["cost_ratio_vs_baseline"] == pytest.approx(
        trn1["cost_per_million_units"] / trn1["baseline_cost_per_million_units"])
    assert on(r, "trn2.48xlarge")["price_per_hour"] == 40  # --price, where the table has none
    assert 0 < trn1["mfu"] < 1


@uses("matmul_text")
def test_the_text_report_says_it_is_an_estimate_and_shows_the_cost(runs):
    out = runs["matmul_text"].ok().stdout
    assert "an estimate" in out and "NeuronCore model" in out and "latency p50" in out
    assert "cost per million samples" in out and "cost vs baseline" in out
    assert "jit__lambda" in out


# ---------------------------------------------------------------- frameworks agree


@uses("jax_mlp", "torch_mlp")
def test_torch_xla_and_jax_versions_of_one_model_get_the_same_estimate(runs):
    jax_run, torch_run = report(runs["jax_mlp"].ok()), report(runs["torch_mlp"].ok())
    batch, inputs, hidden, out = 64, 32, 128, 16
    # Forward x @ w1, h @ w2; backward dw2 = h^T g, dh = g w2^T, dw1 = x^T dh.
    flops = 2 * (batch * inputs * hidden + 2 * batch * hidden * out + batch * hidden * out
                 + inputs * batch * hidden)
    for instance in ("trn1.2xlarge", "trn1.32xlarge", "trn2.48xlarge"):
        j, t = on(jax_run, instance), on(torch_run, instance)
        assert j["model_flops_per_step"] == flops, j["programs"]
        assert t["model_flops_per_step"] == flops, t["programs"]
        assert t["step_seconds"] == pytest.approx(j["step_seconds"], rel=0.05)


@uses("jax_mlp", "jax_mlp_bf16")
def test_a_bfloat16_training_step_counts_its_matmuls_at_the_bfloat16_rate_and_no_widening(runs):
    # XLA's CPU compiler widens bf16 products to f32 in fusions of their own (a convert with a
    # transpose or copy for the dot's layout), and wraps each bf16 element-wise operation in
    # converts; forward and backward still count as bf16, and those converts as no work.
    f32 = program(on(report(runs["jax_mlp"].ok()), "trn1.2xlarge"), "jit_step")
    bf16 = program(report(runs["jax_mlp_bf16"].ok())["instances"][0], "jit_step")
    assert list(f32["matmul_flops"]) == ["fp32"]
    assert bf16["matmul_flops"] == {"bf16": f32["matmul_flops"]["fp32"]}, bf16
    assert bf16["vector_ops"] == pytest.approx(f32["vector_ops"], rel=0.05)
    assert bf16["hbm_bytes"] == pytest.approx(f32["hbm_bytes"] / 2, rel=0.05)


# ---------------------------------------------------------------- in the process


@uses("block")
def test_an_estimate_around_a_block_counts_what_ran_inside_it(runs):
    result = runs["block"].ok()
    (line,) = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")]
    trn1, trn2 = json.loads(line[len("RESULT "):])
    (p,) = trn1["programs"]  # the add before the block is not there
    assert p["executions"] == 3 and p["matmul_flops"] == {"fp32": 2 * M * K * N}
    assert trn1["throughput_units_per_second"] == pytest.approx(2 * 256 / trn1["step_seconds"])
    assert trn2["price_per_hour"] == 40
    assert "an estimate" in result.stdout and "cost per million samples" in result.stdout


@uses("at_exit")
def test_pjrt_neuron_estimate_reports_once_at_exit(runs):
    result = runs["at_exit"].ok()
    reports = [l for l in result.stderr.splitlines() if l.startswith("pjrt-neuron estimate, process ")]
    assert len(reports) == 1, result.describe()
    assert "jit__lambda" in result.stderr and "step time" in result.stderr


# ---------------------------------------------------------------- bad input


@uses("fails")
def test_a_failing_scripts_exit_code_is_passed_through(runs):
    result = runs["fails"]
    assert result.returncode == 3, result.describe()
    assert report(result)["script_exit_code"] == 3


def _cli(*args) -> tuple[int, str]:
    import subprocess

    p = subprocess.run([sys.executable, "-m", "pjrt_neuron", "estimate", *args], capture_output=True, text=True,
                       cwd=REPO, env=_env("jax"), timeout=120)
    return p.returncode, p.stderr


@pytest.mark.parametrize("args, message", [
    (("--instance", "trn9.huge", "--", "true"), "unknown instance type 'trn9.huge'; known: "),
    (("--price", "trn1.2xlarge=-1", "--", "true"), "the price must be positive"),
    (("--price", "trn1.2xlarge", "--", "true"), "expected INSTANCE=DOLLARS_PER_HOUR"),
    (("--price", "nope=1", "--", "true"), "unknown instance type 'nope'"),
    (("--per-step", "0", "--", "true"), "--per-step must be positive"),
    (("--baseline-price", "4", "--", "true"), "--baseline-price and --baseline-throughput go together"),
    ((), "give the command to run after --"),
    (("--", "true"), "the script ran no programs"),
    (("--", "/nonexistent/python"), "could not run '/nonexistent/python'"),
    (("--trace", "/nonexistent/dir/step.json", "--", "true"), "its directory does not exist"),
    (("--plot", "/nonexistent/dir/roofline.png", "--", "true"), "--plot /nonexistent/dir/roofline.png: its directory"),
])
def test_bad_arguments_are_clear_errors(args, message):
    code, stderr = _cli(*args)
    assert code == 2, stderr
    assert "pjrt-neuron estimate: " in stderr and message in stderr, stderr


def test_an_instance_with_fewer_cores_than_the_run_used_is_refused():
    from pjrt_neuron import estimator

    cost = {"matmul_flops": {"fp32": 1e9}, "vector_ops": 0, "transcendental_ops": 0, "parameter_bytes": 8,
            "output_bytes": 8, "collectives": [], "unknown_trip_count": False}
    programs = {"p": estimator.Program("p", "step", 1, 1, cost, executions=1, device_executions=1, devices={31})}
    executions = [{"program_id": "p", "devices": [31], "start_us": 0, "end_us": 1}]
    target = estimator.make_target("trn1.2xlarge", {})
    with pytest.raises(estimator.EstimateError, match="used NeuronCores up to 31, but trn1.2xlarge has 2"):
        estimator.estimate_for(target, programs, executions, "none", 1.0, "steps", None)
    with pytest.raises(estimator.EstimateError, match="unknown instance type 'trn9'"):
        estimator.make_target("trn9", {})


def test_programs_that_share_a_name_are_told_apart_in_the_text_report():
    # torch-xla names many graphs SyncTensorsGraph.<n>; two different ones may share a name.
    from pjrt_neuron import estimator

    cost = {"matmul_flops": {"fp32": 1e6}, "vector_ops": 10, "transcendental_ops": 0, "parameter_bytes": 8,
            "output_bytes": 8, "collectives": [], "unknown_trip_count": False}
    programs = {pid: estimator.Program(pid, "SyncTensorsGraph.264", 1, 1, cost, executions=runs,
                                       device_executions=runs, devices={0})
                for pid, runs in (("77-3", 2), ("77-9", 1))}
    executions = [{"program_id": pid, "devices": [0], "start_us": t, "end_us": t + 1}
                  for t, pid in enumerate(["77-3", "77-9", "77-3"])]
    target = estimator.make_target("trn1.2xlarge", {})
    result = estimator.estimate_for(target, programs, executions, "none", 1.0, "steps", None)
    rows = [line.split()[0:2] for line in estimator.format_text([result], 0).splitlines()
            if line.strip().startswith("SyncTensorsGraph")]
    assert sorted(rows) == [["SyncTensorsGraph.264", "#3"], ["SyncTensorsGraph.264", "#9"]], rows
