"""The estimate's NeuronCore model (pjrt_neuron/estimation/model.py), its instance-level answers,
`pjrt-neuron plan`, and its calibration against AWS's published results, computed from the work
counts committed in benchmarks/calibration/work_counts.json. No subprocesses: each test is
arithmetic on counts, so the file runs in about a second."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

from pjrt_neuron import estimator, estimator_model, estimator_plan

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks" / "calibration"))

import rows as calibration  # noqa: E402


def _cost(flops=0.0, matmuls=(), intermediates=(), parameter_bytes=1024, output_bytes=1024, collectives=()):
    return {"matmul_flops": {"bf16": flops} if flops else {}, "vector_ops": 0, "transcendental_ops": 0,
            "parameter_bytes": parameter_bytes, "output_bytes": output_bytes, "collectives": list(collectives),
            "unknown_trip_count": False, "matmuls": list(matmuls), "intermediates": list(intermediates)}


def _matmul(m, k, n, batch=1):
    return {"type": "bf16", "batch": batch, "m": m, "k": k, "n": n, "count": 1}


def _one_program_run(cost, cores=(0,), runs=3):
    programs = {"p": estimator.Program("p", "step", len(cores), 1, cost, executions=runs,
                                       device_executions=runs * len(cores), devices=set(cores))}
    executions = [{"program_id": "p", "devices": list(cores), "start_us": t, "end_us": t + 1} for t in range(runs)]
    return programs, executions


# ---------------------------------------------------------------- the model


def test_full_tiles_keep_the_tensor_engine_nearly_busy_and_partial_tiles_waste_it():
    full = estimator_model.matmul_efficiency(1024, 1024, 1024)
    assert 0.85 < full <= 1.0
    # A contraction of 64 fills half the 128 partitions; of 1, one of them.
    assert estimator_model.matmul_efficiency(1024, 64, 1024) == pytest.approx(full / 2)
    assert estimator_model.matmul_efficiency(1024, 1, 1024) < 0.01
    # 130 columns take two column tiles: barely half of the second one works.
    assert estimator_model.matmul_efficiency(130, 1024, 130) < 0.6 * full
    # Attention's score product at BERT's head size 64: half the array.
    assert estimator_model.matmul_efficiency(128, 64, 128, batch=96) < 0.5


def test_small_matmuls_pay_the_instruction_overhead():
    assert estimator_model.matmul_efficiency(128, 128, 2) < 0.2 < estimator_model.matmul_efficiency(128, 128, 512)


def test_the_tensor_engine_time_follows_the_tiles_not_the_flops():
    target = estimator.make_target("trn1.2xlarge", {})
    full = _cost(2 * 1024 ** 3, [_matmul(1024, 1024, 1024)])
    thin = _cost(2 * 1024 ** 3, [_matmul(1024 * 16, 64, 1024)])  # the same FLOPs through a contraction of 64
    assert estimator.tensor_engine_seconds(thin, target, "none") == pytest.approx(
        2 * estimator.tensor_engine_seconds(full, target, "none"), rel=0.01)


def test_activations_larger_than_sbuf_cost_hbm_traffic_and_smaller_ones_do_not():
    target = estimator.make_target("trn1.2xlarge", {})
    sbuf = target.figures["sbuf_bytes_per_core"]
    small = estimator.Program("s", "s", 1, 1, _cost(intermediates=[{"bytes": 1 << 20, "count": 4}]))
    large = estimator.Program("l", "l", 1, 1, _cost(intermediates=[{"bytes": 2 * sbuf, "count": 4}]))
    none = estimator.Program("n", "n", 1, 1, _cost())
    e_small, e_large, e_none = (estimator.estimate_program(p, target, "none") for p in (small, large, none))
    assert e_small.parts["memory"] == pytest.approx(e_none.parts["memory"])
    assert e_large.parts["spilled_hbm_bytes"] == 2 * (2 * sbuf) * 4  # each written once, read once
    hbm = target.figures["hbm_bytes_per_second"] * target.share() * estimator_model.constant("hbm_efficiency")
    assert e_large.parts["memory"] - e_none.parts["memory"] == pytest.approx(16 * sbuf / hbm)
    assert e_large.seconds > e_none.seconds


def test_engines_that_wait_on_one_another_take_longer_than_the_longest():
    assert estimator_model.serialised([3.0, 1.0, 1.0]) == pytest.approx(
        3.0 + (1 - estimator_model.constant("engine_overlap")) * 2.0)
    assert estimator_model.serialised([]) == 0.0


def test_every_constant_names_its_source():
    for name, c in estimator_model.CONSTANTS.items():
        assert c.source and c.value > 0, name


# ---------------------------------------------------------------- instance-level answers


def test_one_copy_per_core_multiplies_throughput_and_cost_per_million_follows_the_instance():
    target = estimator.make_target("trn1.32xlarge", {})
    programs, executions = _one_program_run(_cost(2e12, [_matmul(4096, 4096, 4096)] * 15))
    r = estimator.estimate_for(target, programs, executions, "none", 32.0, "samples", None)
    assert r["deployment"]["mode"] == "copies" and r["deployment"]["copies"] == 32
    per_copy = 32.0 / r["step_seconds"]
    assert r["throughput_per_copy_units_per_second"] == pytest.approx(per_copy)
    assert r["throughput_units_per_second"] == pytest.approx(32 * per_copy)
    assert r["cost_per_million_units"] == pytest.approx(1e6 / (32 * per_copy) * 21.50 / 3600)
    as_run = estimator.estimate_for(target, programs, executions, "none", 32.0, "samples", None, "as-run")
    assert as_run["throughput_units_per_second"] == pytest.approx(per_copy)
    assert as_run["cost_per_million_units"] == pytest.approx(32 * r["cost_per_million_units"])
    assert r["latency_p50_seconds"] == r["step_seconds"]


def test_data_parallel_widens_the_scripts_all_reduce_to_the_whole_instance():
    target = estimator.make_target("trn1.32xlarge", {})
    gradients = [{"kind": "all-reduce", "bytes": 64 << 20, "group_size": 0, "count": 1}]
    programs, executions = _one_program_run(_cost(2e9, [_matmul(1024, 1024, 1024)], collectives=gradients),
                                            cores=(0, 1))
    two = estimator.estimate_for(target, programs, executions, "none", 2.0, "samples", None, "copies")
    wide = estimator.estimate_for(target, programs, executions, "none", 2.0, "samples", None, "data-parallel")
    assert two["deployment"]["copies"] == wide["deployment"]["copies"] == 16
    (p2,), (p32,) = two["programs"], wide["programs"]
    assert p32["link_bytes"] == pytest.approx(2 * 31 / 32 * (64 << 20))
    assert p32["parts_seconds"]["collectives"] > 3 * p2["parts_seconds"]["collectives"]
    assert wide["step_seconds"] > two["step_seconds"]


def test_the_range_holds_the_point_estimate_and_follows_the_calibration_spread():
    target = estimator.make_target("inf2.xlarge", {})
    programs, executions = _one_program_run(_cost(1e11, [_matmul(1024, 768, 768)] * 30))
    r = estimator.estimate_for(target, programs, executions, "matmult", 8.0, "samples", None)
    for key in ("throughput_units_per_second", "cost_per_million_units", "latency_p50_seconds"):
        low, high = r["range"][key]
        assert low <= r[key] <= high, key
    low, high = r["range"]["throughput_units_per_second"]
    assert high / low == pytest.approx(estimator_model.constant("calibration_ratio_high")
                                       / estimator_model.constant("calibration_ratio_low"))
    assert "held-out" in r["range"]["checked_against"]


def test_an_unknown_deployment_is_a_clear_error():
    target = estimator.make_target("trn1.2xlarge", {})
    programs, executions = _one_program_run(_cost())
    with pytest.raises(estimator.EstimateError, match="--deployment 'pipeline': expected one of copies"):
        estimator.estimate_for(target, programs, executions, "none", 1.0, "steps", None, "pipeline")


# ---------------------------------------------------------------- plan


def _estimate(name, price, throughput, latency, spread=(0.5, 2.0)):
    return {"instance_type": name, "price_per_hour": price, "throughput_units_per_second": throughput,
            "latency_p50_seconds": latency,
            "range": {"throughput_units_per_second": [throughput * spread[0], throughput * spread[1]]}}


def test_the_plan_adds_training_hours_and_the_serving_fleet_a_month():
    training = {"trn1.32xlarge": _estimate("trn1.32xlarge", 21.5, 1000.0, 0.1)}
    serving = {"inf2.xlarge": _estimate("inf2.xlarge", 0.758, 500.0, 0.004),
               "trn1.32xlarge": _estimate("trn1.32xlarge", 21.5, 20000.0, 0.002)}
    plan = estimator_plan.make_plan(training, serving, training_units_per_month=3.6e9,
                                    serving_units_per_day=86400 * 1200, peak_to_average=2.0,
                                    latency_bound_seconds=0.010, current_monthly_cost=40000.0)
    rows = {r["instance_type"]: r for r in plan["rows"]}
    # 3.6e9 samples at 1000/s: 1000 instance-hours at $21.50.
    assert rows["trn1.32xlarge"]["training"]["instance_hours"] == pytest.approx(1000)
    assert rows["trn1.32xlarge"]["training"]["monthly_cost"] == pytest.approx(21500)
    assert rows["trn1.32xlarge"]["training"]["monthly_cost_range"] == pytest.approx([10750, 43000])
    # Peak 2400/s: five inf2.xlarge at 500/s each, the whole month.
    assert rows["inf2.xlarge"]["serving"]["instances"] == 5
    assert rows["inf2.xlarge"]["serving"]["monthly_cost"] == pytest.approx(5 * 0.758 * 730)
    assert rows["trn1.32xlarge"]["serving"]["instances"] == 1
    assert plan["cheapest"] == {"training_on": "trn1.32xlarge", "serving_on": "inf2.xlarge",
                                "monthly_cost": pytest.approx(21500 + 5 * 0.758 * 730)}
    text = estimator_plan.format_plan(plan)
    assert "cheapest: training on trn1.32xlarge, serving on inf2.xlarge" in text and "today: $40,000" in text


def test_serving_that_misses_the_latency_bound_gets_no_instance_count():
    serving = {"inf2.xlarge": _estimate("inf2.xlarge", 0.758, 500.0, 0.030)}
    plan = estimator_plan.make_plan(None, serving, 0, 1e6, 1.0, 0.010, None)
    (row,) = plan["rows"]
    assert row["serving"]["instances"] is None and "exceeds the bound" in row["serving"]["why"]
    assert plan["cheapest"] is None


def test_plan_refuses_what_is_not_an_estimate_report(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    with pytest.raises(estimator_plan.PlanError, match="not a report of `pjrt-neuron estimate --json`"):
        estimator_plan.read_report(str(bad), "training")
    with pytest.raises(estimator_plan.PlanError, match="--serving /nonexistent.json"):
        estimator_plan.read_report("/nonexistent.json", "serving")
    with pytest.raises(estimator_plan.PlanError, match="give --training"):
        estimator_plan.make_plan(None, None, 0, 0, 1.0, None, None)


# ---------------------------------------------------------------- calibration


@pytest.fixture(scope="module")
def calibrated():
    return calibration.evaluate(calibration.load_work_counts())


def test_every_calibration_row_has_its_script_and_its_recorded_counts(calibrated):
    counts = calibration.load_work_counts()
    for row in calibration.ROWS:
        assert os.path.isfile(os.path.join(calibration.HERE, row["script"] + ".py")), row["script"]
        assert counts[row["script"]], row["script"]
    assert {r["kind"] for r in calibrated if not r["fit"]} == {"inference", "training"}


@pytest.mark.parametrize("kind", [
    "inference",
    # The goal is not reached for training: the FP32 BERT-large row is predicted 2.05x too fast.
    pytest.param("training", marks=pytest.mark.xfail(strict=True, reason="2 of 3 held-out training rows")),
])
def test_held_out_rows_are_predicted_within_a_factor_of_one_and_a_half(calibrated, kind):
    held = [r for r in calibrated if not r["fit"] and r["kind"] == kind]
    inside = [r for r in held if calibration.within(r["ratio"])]
    report = {r["name"]: round(r["ratio"], 2) for r in held}
    assert len(inside) * 6 >= len(held) * 5, report


def test_the_reported_range_is_the_held_out_spread(calibrated):
    ratios = [r["ratio"] for r in calibrated if not r["fit"]]
    assert estimator_model.constant("calibration_ratio_low") == pytest.approx(min(ratios), abs=0.01)
    assert estimator_model.constant("calibration_ratio_high") == pytest.approx(max(ratios), abs=0.01)
    assert math.isfinite(sum(ratios))


def test_the_plan_command_reads_estimate_reports_and_prints_the_month(tmp_path, capsys):
    from pjrt_neuron import cli

    def write(name, estimates):
        path = tmp_path / name
        path.write_text("script output first\n" + json.dumps({"estimate": True, "instances": estimates}))
        return str(path)

    training = write("train.json", [_estimate("trn1.32xlarge", 21.5, 1000.0, 0.1)])
    serving = write("serve.json", [_estimate("inf2.xlarge", 0.758, 500.0, 0.004)])
    code = cli.main(["plan", "--training", training, "--serving", serving, "--training-units-per-month", "3.6e9",
                     "--serving-units-per-day", str(86400 * 1200), "--latency-bound-ms", "10",
                     "--current-monthly-cost", "40000", "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert code == 0
    assert plan["cheapest"]["monthly_cost"] == pytest.approx(21500 + 3 * 0.758 * 730)
    assert cli.main(["plan", "--training", training, "--peak-to-average", "0.5"]) == 2
    assert "--peak-to-average must be at least 1" in capsys.readouterr().err
