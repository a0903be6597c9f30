"""torch-xla on simulated NeuronCores, compared with torch-xla's own CPU device.

torch-xla picks its device type once per process, so every check runs a script in a
subprocess (tests/torch_scripts/, or an example) and reads the JSON or text it prints.
Importing torch_xla takes many seconds, so related checks share one script, and the
subprocesses the selected tests need are started together up front on a small pool.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import job_pool
from job_pool import Job, JobPool, uses, wanted_jobs

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "tests" / "torch_scripts"
EXAMPLES = REPO / "examples"
CLI = Path(sys.executable).with_name("pjrt-neuron")

GIB = 1 << 30
MIB = 1 << 20
OUR_PLUGIN = "pjrt_neuron.torch_plugin.NeuronPlugin"
AWS_PLUGIN = "torch_xla._internal.neuron.NeuronPlugin"
TORCH_EXAMPLE_EPOCHS = 10  # the default 20 take ~30 s here; 10 still reach ~0.97
TIMEOUT = 420

# Settings that would change what a subprocess does if inherited from the caller.
_SCRUBBED = (
    "PJRT_DEVICE", "CPU_NUM_DEVICES", "XLA_REGISTER_INSTALLED_PLUGINS", "NEURON_LIBRARY_PATH",
    "PJRT_NEURON_TORCH_PLUGIN", "PJRT_NEURON_INSTANCE_TYPE",
    "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "JAX_PLATFORMS", "PJRT_DYNAMIC_PLUGINS",
    "XLA_USE_SPMD", "XLA_USE_32BIT_LONG", "XLA_USE_BF16", "XLA_DOWNCAST_BF16", "PJRT_NEURON_SIM_ENGINE",
)
NEWER_ENGINE = "lammps-jax-pjrt-cpu"  # the engine-jax extra's build (README, "Engine builds")


def _cli(what: str) -> str:
    """`pjrt-neuron library-path` / `engine-path`, as a user would run them."""
    argv = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "pjrt_neuron"]
    return subprocess.run([*argv, what], check=True, capture_output=True, text=True).stdout.strip()


def _env(**settings) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    # Jobs run side by side, each on its own simulated instance: NeuronCores are exclusive.
    env["PJRT_NEURON_LOCK_DIR"] = tempfile.mkdtemp(prefix="pjrt-neuron-locks-")
    env.update({k: v for k, v in settings.items() if v is not None})
    return env


def _script(name: str, *args) -> list:
    return [sys.executable, str(SCRIPTS / name), *args]


def _jobs() -> dict:
    torch_example = [sys.executable, str(EXAMPLES / "train_digits_torch.py"),
                     "--epochs", str(TORCH_EXAMPLE_EPOCHS)]
    jax_example = [sys.executable, str(EXAMPLES / "train_digits_jax.py")]
    return {
        # Longest first, so the pool finishes sooner.
        "torch_example_neuron": Job(torch_example, _env(PJRT_DEVICE="NEURON")),
        "torch_example_cpu": Job(torch_example, _env(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1")),
        "torch_example_newer_engine": Job(torch_example, _env(PJRT_DEVICE="NEURON", PJRT_NEURON_SIM_ENGINE=NEWER_ENGINE)),
        "neuron_runtime_newer_engine": Job(_script("neuron_runtime.py"),
                                           _env(PJRT_DEVICE="NEURON", PJRT_NEURON_SIM_ENGINE=NEWER_ENGINE)),
        "neuron_runtime": Job(_script("neuron_runtime.py"), _env(PJRT_DEVICE="NEURON")),
        # The CPU reference also checks that PJRT_NEURON_TORCH_PLUGIN=aws hands the NEURON
        # slot to AWS's plugin through torch-xla's own entry-point registration.
        "train_cpu_aws_choice": Job(_script("train_mlp.py"),
                                    _env(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1",
                                         PJRT_NEURON_TORCH_PLUGIN="aws")),
        "builtin_loader": Job(_script("builtin_loader.py"),
                              _env(XLA_REGISTER_INSTALLED_PLUGINS="0", PJRT_DEVICE="NEURON",
                                   NEURON_LIBRARY_PATH=_cli("library-path"),
                                   PJRT_NEURON_ENGINE_LIBRARY=_cli("engine-path"))),
        "resize_neuron": Job(_script("resize.py"), _env(PJRT_DEVICE="NEURON")),
        "resize_cpu": Job(_script("resize.py"), _env(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1")),
        "profile_neuron": Job(_script("profile_trace.py"), _env(PJRT_DEVICE="NEURON")),
        "plugin_selection": Job(_script("plugin_selection.py"), _env(XLA_REGISTER_INSTALLED_PLUGINS="0")),
        "jax_example_neuron": Job(jax_example, _env(JAX_PLATFORMS="neuron")),
        "jax_example_cpu": Job(jax_example, _env(JAX_PLATFORMS="cpu")),
    }


@pytest.fixture(scope="module")
def results(request):
    """Starts every subprocess that the selected tests of this module read, all at once."""
    # Two cores: three workers keep both busy while a process waits on start-up or I/O.
    with JobPool(_jobs(), wanted_jobs(request), workers=3,
                 run=functools.partial(job_pool.run, cwd=REPO, timeout=TIMEOUT)) as pool:
        yield pool


# ---------------------------------------------------------------- training parity


@uses("neuron_runtime", "train_cpu_aws_choice")
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_optimizer_steps_match_cpu(results, optimizer):
    neuron = results["neuron_runtime"].json()["training"][optimizer]
    cpu_run = results["train_cpu_aws_choice"].json()
    assert cpu_run["device_type"] == "CPU"
    cpu = cpu_run[optimizer]
    assert len(neuron) == len(cpu) == 5
    assert neuron == pytest.approx(cpu, abs=1e-5, rel=0), (neuron, cpu)
    # The steps really trained (the data are learnable, so the loss must fall).
    assert neuron[-1] < neuron[0] - 0.1, neuron


# ---------------------------------------------------------------- upsampling custom calls


RESIZE_CASES = ["nearest_x2", "nearest_to_5x7", "bilinear_x2", "bilinear_x2_align", "bilinear_to_5x7",
                "bilinear_to_5x7_align", "bilinear_down_to_2x3"]


@uses("resize_neuron", "resize_cpu")
def test_upsampling_goes_through_neuron_only_custom_calls(results):
    # On NEURON torch-xla emits the Resize* custom calls the plugin must serve; CPU never does.
    assert results["resize_neuron"].json()["hlo_targets"] == ["ResizeBilinear", "ResizeNearest",
                                                             "ResizeNearestGrad"]
    assert results["resize_cpu"].json()["hlo_targets"] == []


@uses("resize_neuron", "resize_cpu")
@pytest.mark.parametrize("case", RESIZE_CASES)
@pytest.mark.parametrize("part", ["forward", "grad"])
def test_interpolate_matches_cpu(results, case, part):
    neuron = results["resize_neuron"].json()
    cpu = results["resize_cpu"].json()
    assert neuron["device_type"] == "NEURON" and cpu["device_type"] == "CPU"
    got, want = neuron["cases"][case][part], cpu["cases"][case][part]
    # Same shapes; values equal up to float rounding (weights are applied in another order).
    np = pytest.importorskip("numpy")
    got, want = np.array(got), np.array(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@uses("resize_neuron", "resize_cpu")
def test_unet_training_steps_with_upsampling_match_cpu(results):
    neuron = results["resize_neuron"].json()["unet_losses"]
    cpu = results["resize_cpu"].json()["unet_losses"]
    assert len(neuron) == len(cpu) == 3
    assert neuron == pytest.approx(cpu, rel=1e-5, abs=1e-6)
    assert neuron[-1] < neuron[0]


# ---------------------------------------------------------------- profiler


@uses("profile_neuron")
def test_profiler_trace_has_a_span_per_execution_and_no_startup_warning(results):
    run = results["profile_neuron"]
    out = run.json()
    assert out["device_type"] == "NEURON" and out["files"] == 1
    # Three steps ran on core 0 and nothing on core 1.
    assert list(out["planes"]) == ["/device:NEURON:0"], out["planes"]
    events = out["planes"]["/device:NEURON:0"]
    assert len(events) == 3 and all(e.startswith("SyncTensorsGraph") for e in events), events
    assert "Profiler API not found" not in run.stderr


# ---------------------------------------------------------------- transfers


DTYPES = ["float32", "bfloat16", "float16", "int64", "int32", "int8", "uint8", "bool",
          "float32_3d", "bfloat16_3d", "int64_2d", "uint8_2d"]


@uses("neuron_runtime")
@pytest.mark.parametrize("dtype", DTYPES)
def test_transfers_are_exact(results, dtype):
    t = results["neuron_runtime"].json()["transfers"][dtype]
    assert t["devices"] == ["xla:0", "xla:1"]
    # Bitwise equal after host->core0->host, core0->core1->host, host->core1->host, core1->core0->host.
    assert {k: v for k, v in t.items() if k != "devices"} == {
        "dev0_roundtrip": True, "dev0_to_dev1": True, "dev1_roundtrip": True, "dev1_to_dev0": True}


@uses("neuron_runtime")
def test_compute_on_second_core(results):
    out = results["neuron_runtime"].json()
    assert out["dev1"] == "xla:1"
    assert out["copy_to_dev1_equal"] is True
    assert out["compute_on_dev1_equal"] is True


# ---------------------------------------------------------------- runtime queries


@uses("neuron_runtime")
def test_runtime_queries(results):
    out = results["neuron_runtime"].json()
    assert out["queries"] == {
        "device_type": "NEURON",
        "global_runtime_device_count": 2,
        "addressable_runtime_device_count": 2,
        "addressable_device_count": 2,
        "global_device_count": 2,
        "process_index": 0,
        "process_count": 1,
        "world_size": 1,  # one process, no replication set up
    }
    assert out["devices"] == ["xla:0", "xla:1"]


@uses("neuron_runtime")
def test_device_attributes(results):
    out = results["neuron_runtime"].json()
    for index, device in enumerate(["xla:0", "xla:1"]):
        assert out["attributes"][device] == {
            "coords": [0, 0, 0], "chip_index": 0, "core_on_chip": index, "chip_coords": [0],
            "instance_type": "trn1.2xlarge",
            "hbm_bytes": 16 * GIB, "logical_nc_config": 1}
    names = [a["name"] for a in out["all_attributes"]]
    assert names == ["NEURON:0", "NEURON:1"]
    assert [a["core_on_chip"] for a in out["all_attributes"]] == [0, 1]


@uses("neuron_runtime")
def test_memory_info(results):
    out = results["neuron_runtime"].json()
    snapshots = ["memory_before", "memory_with_1mib_on_dev0", "memory_with_1mib_copied_to_dev1", "memory_after_free"]
    for snap in snapshots:
        for device in ("xla:0", "xla:1"):
            info = out[snap][device]
            assert info["bytes_limit"] == 16 * GIB, (snap, device, info)
            assert 0 <= info["bytes_used"] <= info["bytes_limit"], (snap, device, info)

    def used(snap, device):
        return out[snap][device]["bytes_used"]

    before0, before1 = used("memory_before", "xla:0"), used("memory_before", "xla:1")
    # 1 MiB placed on core 0 counts there and only there...
    assert used("memory_with_1mib_on_dev0", "xla:0") >= before0 + MIB
    assert used("memory_with_1mib_on_dev0", "xla:1") == before1
    # ...its copy counts on core 1...
    assert used("memory_with_1mib_copied_to_dev1", "xla:1") >= before1 + MIB
    # ...and freeing both gives the memory back, while the peak remembers it.
    assert used("memory_after_free", "xla:0") < before0 + MIB
    assert used("memory_after_free", "xla:1") < before1 + MIB
    assert out["memory_after_free"]["xla:1"]["peak_bytes_used"] >= MIB


# ---------------------------------------------------------------- examples


def _epoch_losses(stdout: str) -> list:
    return re.findall(r"^epoch (\d+)/\d+\s+loss (\S+)$", stdout, flags=re.M)


def _accuracy(stdout: str) -> float:
    m = re.search(r"^test accuracy: (\S+)$", stdout, flags=re.M)
    assert m, stdout
    return float(m.group(1))


@uses("torch_example_neuron", "torch_example_cpu")
def test_torch_digits_example(results):
    neuron = results["torch_example_neuron"].ok()
    assert re.search(r"^device: xla:0 \(NEURON\)$", neuron.stdout, flags=re.M), neuron.describe()
    assert _accuracy(neuron.stdout) >= 0.95, neuron.describe()
    cpu = results["torch_example_cpu"].ok()
    assert re.search(r"^device: xla:0 \(CPU\)$", cpu.stdout, flags=re.M), cpu.describe()
    losses = _epoch_losses(neuron.stdout)
    assert len(losses) == TORCH_EXAMPLE_EPOCHS
    # The example prints 4 decimals: the runs must agree to every printed digit.
    assert losses == _epoch_losses(cpu.stdout)
    assert _accuracy(neuron.stdout) == _accuracy(cpu.stdout)
    # Quiet by default: its int64 labels stay within int32, so nothing changes on Trainium.
    assert "pjrt-neuron: Trainium" not in neuron.stderr, neuron.describe()


# torch-xla compiles each program for both cores and launches it on one: on the newer build such
# launches run a portable single-core copy (sim_executable.cc, SingleCoreCopy); before, the second hung.
@uses("torch_example_newer_engine", "torch_example_cpu")
def test_torch_digits_example_on_the_newer_engine_build(results):
    neuron = results["torch_example_newer_engine"].ok()
    cpu = results["torch_example_cpu"].ok()
    assert re.search(r"^device: xla:0 \(NEURON\)$", neuron.stdout, flags=re.M), neuron.describe()
    assert _epoch_losses(neuron.stdout) == _epoch_losses(cpu.stdout)
    assert len(_epoch_losses(neuron.stdout)) == TORCH_EXAMPLE_EPOCHS
    assert _accuracy(neuron.stdout) == _accuracy(cpu.stdout) >= 0.95


@uses("neuron_runtime_newer_engine", "train_cpu_aws_choice")
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_optimizer_steps_and_second_core_on_the_newer_engine_build(results, optimizer):
    out = results["neuron_runtime_newer_engine"].json()
    neuron, cpu = out["training"][optimizer], results["train_cpu_aws_choice"].json()[optimizer]
    assert len(neuron) == len(cpu) == 5
    assert neuron == pytest.approx(cpu, abs=1e-5, rel=0), (neuron, cpu)
    assert out["copy_to_dev1_equal"] is True and out["compute_on_dev1_equal"] is True


@uses("jax_example_neuron", "jax_example_cpu")
def test_jax_digits_example(results):
    neuron = results["jax_example_neuron"].ok()
    assert "pjrt-neuron: Trainium" not in neuron.stderr, neuron.describe()
    assert "platform: neuron" in neuron.stdout, neuron.describe()
    assert _accuracy(neuron.stdout) >= 0.95, neuron.describe()
    cpu = results["jax_example_cpu"].ok()
    assert "platform: cpu" in cpu.stdout, cpu.describe()
    losses = _epoch_losses(neuron.stdout)
    assert len(losses) == 20
    assert losses == _epoch_losses(cpu.stdout)
    assert _accuracy(neuron.stdout) == _accuracy(cpu.stdout)


# ---------------------------------------------------------------- plugin selection


@uses("neuron_runtime")
def test_installed_entry_points_select_our_plugin(results):
    # torch-xla registers both `neuron` entry points at import; ours must hold the slot.
    assert results["neuron_runtime"].json()["registry_neuron"] == OUR_PLUGIN


@uses("train_cpu_aws_choice")
def test_aws_choice_keeps_aws_plugin_at_import(results):
    assert results["train_cpu_aws_choice"].json()["registry_neuron"] == AWS_PLUGIN


@uses("plugin_selection")
def test_registration_order(results):
    out = results["plugin_selection"].json()
    assert out["registry_at_start"] == []  # XLA_REGISTER_INSTALLED_PLUGINS=0 took effect
    assert set(out["neuron_entry_points"]) == {
        "torch_xla._internal.neuron:NeuronPlugin", "pjrt_neuron.torch_plugin:NeuronPlugin"}
    assert out["aws_registered_unguarded"] == AWS_PLUGIN
    assert out["guard_installed"] is True
    for case in ("default:aws_then_ours", "default:ours_then_aws", "default:entry_points",
                 "default:entry_points_reversed", "explicit:entry_points"):
        assert out[case] == OUR_PLUGIN, case


@uses("plugin_selection")
def test_aws_choice_in_either_order(results):
    out = results["plugin_selection"].json()
    for case in ("aws:aws_then_ours", "aws:ours_then_aws", "aws:entry_points", "aws:entry_points_reversed"):
        assert out[case] == AWS_PLUGIN, case


@uses("plugin_selection")
def test_invalid_choice_names_the_variable(results):
    out = results["plugin_selection"].json()
    for who in ("ours", "aws"):
        err = out[f"invalid:{who}"]
        assert err["raised"] == "ConfigurationError", err
        assert err["is_value_error"] is True
        assert "PJRT_NEURON_TORCH_PLUGIN" in err["message"] and "bogus" in err["message"], err
        assert "pjrt-neuron" in err["message"] and "aws" in err["message"], err
    assert out["other_name_registered"] is True


# ---------------------------------------------------------------- torch-xla's built-in loader


@uses("builtin_loader")
def test_builtin_neuron_loader(results):
    out = results["builtin_loader"].json()
    assert out["registry"] == [] and out["dynamic_plugins"] is False  # really the built-in branch
    assert out["device"] == "xla:0" and out["device_type"] == "NEURON"
    assert out["device_count"] == 2
    assert out["attributes"]["instance_type"] == "trn1.2xlarge"  # our library answered
    assert out["max_abs_err"] <= 1e-5
    assert out["int_sum"] == 45
