"""torch.distributed on the native `neuron` device (current PyTorch, no torch-xla), under torchrun.

Every job is `torchrun --nproc_per_node=2` on a simulated trn1.2xlarge of its own (one NeuronCore
per rank), with `dist.init_process_group()` and nothing neuron-specific but the device:

- multiprocess_scripts/native_collectives.py: each collective on neuron tensors (the package's
  `neuron` backend, through the plugin's multi-process job) against the same call on CPU tensors
  in the same processes (gloo, which init_process_group() keeps for the CPU).
- multiprocess_scripts/native_ddp.py: DistributedDataParallel training an MLP on digits, eager and
  under torch.compile(backend="neuron"); losses and weights against one CPU process on the whole
  global batch, and against the same job on the CPU with gloo.
- multiprocess_scripts/native_faults.py: ranks that launch different shapes, a rank that dies, a
  rank that never comes: each fails in bounded time with DistBackendError naming the rank(s).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 10):
    pytest.skip("the native neuron device needs torch >= 2.10 (it runs in .ci/run's current-PyTorch venv)",
                allow_module_level=True)
pytest.importorskip("torch_mlir")

import job_pool  # noqa: E402
from job_pool import Job, JobPool, uses, wanted_jobs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "tests" / "multiprocess_scripts"
TIMEOUT = 300
STEPS = 8
TOLERANCE = 1e-4

_SCRUBBED = (
    "PJRT_DEVICE", "PJRT_NEURON_INSTANCE_TYPE", "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES",
    "NEURON_PJRT_PROCESS_INDEX", "NEURON_PJRT_WORLD_SIZE", "NEURON_PJRT_PROCESSES_NUM_DEVICES",
    "PJRT_NEURON_COLLECTIVE_TIMEOUT", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "PYTEST_XDIST_WORKER",
)


def _torchrun(script: str, *args: str) -> Job:
    """A two-rank torchrun job on an instance of its own; each rank writes rank<r>.json to `data`."""
    out = tempfile.mkdtemp(prefix="pjrt-neuron-native-dist-")
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "NATIVE_DIST_OUT": out, "PJRT_NEURON_COLLECTIVE_TIMEOUT": "60",
                "PJRT_NEURON_LOCK_DIR": tempfile.mkdtemp(prefix="pjrt-neuron-native-dist-locks-")})
    # --standalone: the launcher binds a free port itself (a port chosen here could be taken by
    # the time it starts, with other jobs starting beside it).
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            str(SCRIPTS / script), *args]
    return Job(argv, env, data=out)


def _jobs() -> dict:
    return {  # longest first
        "ddp_neuron": _torchrun("native_ddp.py", "--device", "neuron", "--steps", str(STEPS), "--compiled"),
        "collectives": _torchrun("native_collectives.py"),
        "faults_absent": _torchrun("native_faults.py", "absent"),
        "faults_mismatch": _torchrun("native_faults.py", "mismatch"),
        "faults_dead": _torchrun("native_faults.py", "dead"),
        "ddp_gloo": _torchrun("native_ddp.py", "--device", "cpu", "--steps", str(STEPS)),
    }


@pytest.fixture(scope="module")
def results(request):
    jobs = _jobs()
    with JobPool(jobs, wanted_jobs(request), workers=2,
                 run=functools.partial(job_pool.run, cwd=REPO, timeout=TIMEOUT)) as pool:
        yield _Ranks(pool, jobs)


class _Ranks:
    """Each job's per-rank JSON reports."""

    def __init__(self, pool, jobs):
        self.pool, self.jobs = pool, jobs

    def ranks(self, name: str, count: int = 2) -> list[dict]:
        result = self.pool[name].ok()
        reports = []
        for rank in range(count):
            path = Path(self.jobs[name].data) / f"rank{rank}.json"
            assert path.exists(), f"rank {rank} wrote no report\n{result.describe()}"
            reports.append(json.loads(path.read_text()))
        return reports


# ---------------------------------------------------------------- collectives against gloo


@uses("collectives")
def test_init_process_group_picks_the_neuron_backend_for_neuron_tensors_and_gloo_for_cpu(results):
    for rank, report in enumerate(results.ranks("collectives")):
        assert report["rank"] == rank and report["world"] == 2
        assert report["backends"] == {"neuron": "ProcessGroupNeuron", "cpu": "ProcessGroupGloo"}
        assert report["backend_name"] == "neuron"
        # Each rank drives its own core as neuron:0 (neuron:LOCAL_RANK names it too).
        assert report["device_count"] == 1 and report["tensor_device"] == "neuron:0"


COLLECTIVES = ["all_reduce_sum", "all_reduce_avg", "all_reduce_max", "all_reduce_min", "all_reduce_product",
               "all_reduce_band_int32", "all_reduce_bor_int32", "all_reduce_bxor_int32", "all_reduce_sum_int64",
               "all_reduce_sum_bf16", "broadcast", "all_gather_into_tensor", "all_gather",
               "reduce_scatter_tensor_sum", "reduce_scatter_tensor_avg", "reduce_scatter", "async_works", "barrier"]


@uses("collectives")
@pytest.mark.parametrize("case", COLLECTIVES)
def test_collective_on_neuron_equals_gloo_on_the_cpu(results, case):
    for report in results.ranks("collectives"):
        got = report["results"][case]
        # Compared as JSON: bit for bit, NaN, inf and -0.0 included (broadcast sends -0.0 and NaN).
        assert json.dumps(got["neuron"]) == json.dumps(got["gloo"]), (report["rank"], got)


# ---------------------------------------------------------------- DistributedDataParallel


def _reference():
    spec = importlib.util.spec_from_file_location("native_ddp", SCRIPTS / "native_ddp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reference(STEPS)


def _max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in a)


@uses("ddp_neuron")
def test_ddp_on_neuron_trains_like_one_cpu_process_on_the_global_batch(results):
    reference = _reference()
    ranks = results.ranks("ddp_neuron")
    assert ranks[0]["weights"] == ranks[1]["weights"]  # DDP keeps the ranks identical
    for report in ranks:
        assert len(report["losses"]) == STEPS
        assert max(abs(a - b) for a, b in zip(report["losses"], reference["losses"])) <= TOLERANCE
        assert _max_difference(report["weights"], reference["weights"]) <= TOLERANCE


@uses("ddp_neuron")
def test_compiled_ddp_on_neuron_trains_like_one_cpu_process(results):
    # torch.compile(DistributedDataParallel(model), backend="neuron"): Dynamo's graphs on the
    # device, the gradient buckets reduced by the neuron backend as in eager mode.
    reference = _reference()
    ranks = [r["compiled"] for r in results.ranks("ddp_neuron")]
    assert ranks[0]["weights"] == ranks[1]["weights"]
    for report in ranks:
        assert max(abs(a - b) for a, b in zip(report["losses"], reference["losses"])) <= TOLERANCE
        assert _max_difference(report["weights"], reference["weights"]) <= TOLERANCE


@uses("ddp_neuron", "ddp_gloo")
def test_ddp_on_neuron_equals_the_same_job_on_the_cpu_with_gloo(results):
    neuron, gloo = results.ranks("ddp_neuron"), results.ranks("ddp_gloo")
    for a, b in zip(neuron, gloo):
        assert max(abs(x - y) for x, y in zip(a["losses"], b["losses"])) <= TOLERANCE
        assert _max_difference(a["weights"], b["weights"]) <= TOLERANCE


# ---------------------------------------------------------------- faults


@uses("faults_mismatch")
def test_ranks_that_disagree_on_shape_fail_in_seconds_naming_both(results):
    for report in results.ranks("faults_mismatch"):
        assert report["warm"] == [2.0, 2.0]
        assert report["error"] == "DistBackendError" and report["is_dist_backend_error"], report
        message = report["message"]
        assert "launched different collectives as collective #1" in message, message
        assert "rank 0 ran all_reduce(float32[4], sum)" in message, message
        assert "rank 1 ran all_reduce(float32[5], sum)" in message, message
        assert report["seconds"] < 30, report  # not the 60 s collective timeout


@uses("faults_dead")
def test_a_dead_rank_fails_its_peer_next_collective_at_once_naming_it(results):
    (report,) = results.ranks("faults_dead", count=1)  # rank 1 exited without a report
    assert report["rank"] == 0 and report["error"] == "DistBackendError" and report["is_dist_backend_error"], report
    assert "all_reduce(float32[2], sum) (collective #1 of rank 0) did not run: rank 1 has exited" in report["message"]
    assert report["seconds"] < 30, report


@uses("faults_absent")
def test_a_rank_that_never_comes_fails_its_peer_at_the_process_group_timeout(results):
    (report,) = results.ranks("faults_absent", count=1)
    assert report["error"] == "DistBackendError" and report["is_dist_backend_error"], report
    assert "timed out after 5 s; rank(s) [1] never reached it" in report["message"], report["message"]
    assert 4 <= report["seconds"] < 30, report
