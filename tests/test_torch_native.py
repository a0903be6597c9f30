"""The native PyTorch device `neuron` (current PyTorch, no torch-xla): each behaviour against the CPU.

Runs in the current-PyTorch stack (torch >= 2.10 with torch-mlir; `.venv-pytorch` in .ci/run);
the torch-xla stack has no such device and skips the module.
"""

import gc
import io
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 10):
    pytest.skip("the native neuron device needs torch >= 2.10 (it runs in .ci/run's current-PyTorch venv)",
                allow_module_level=True)
pytest.importorskip("torch_mlir")

REPO = Path(__file__).resolve().parents[1]
ATOL, RTOL = 1e-5, 1e-5


def on_both(fn):
    """fn(device) on the CPU and on neuron:0; both results on the CPU."""
    def host(x):
        if isinstance(x, torch.Tensor):
            return x.detach().cpu()
        if isinstance(x, (list, tuple)):
            return type(x)(host(v) for v in x)
        return x
    return host(fn("cpu")), host(fn("neuron"))


def assert_same(cpu, neuron, atol=ATOL, rtol=RTOL):
    torch.testing.assert_close(neuron, cpu, atol=atol, rtol=rtol)


def own_instance() -> dict:
    """Environment for a child process: a simulated instance of its own (this process holds its cores)."""
    import tempfile

    return {**os.environ, "PJRT_NEURON_LOCK_DIR": tempfile.mkdtemp(prefix="pjrt-neuron-native-")}


def run_script(code: str, env_extra=None, timeout=300) -> subprocess.CompletedProcess:
    env = {**own_instance(), **(env_extra or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=timeout)


# ------------------------------------------------------------------ the device


def test_import_torch_registers_neuron_without_torch_xla_or_jax():
    result = run_script("""
        import sys, torch
        x = torch.ones(3, device="neuron")
        print(x.device.type, x.device, torch.neuron.device_count(), torch.neuron.is_available())
        print(sorted(m for m in ("torch_xla", "jax", "jaxlib") if m in sys.modules))
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert lines[0] == "neuron neuron:0 2 True"
    assert lines[1] == "[]"


def test_factories_match_the_cpu():
    for make in (lambda d: torch.ones(2, 3, device=d), lambda d: torch.zeros(4, dtype=torch.int32, device=d),
                 lambda d: torch.arange(10, device=d), lambda d: torch.full((2, 2), 7.5, device=d),
                 lambda d: torch.eye(3, device=d), lambda d: torch.linspace(0, 1, 5, device=d),
                 lambda d: torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=d)):
        cpu, neuron = on_both(make)
        assert_same(cpu, neuron)


def test_tensor_and_module_to_neuron():
    model = torch.nn.Linear(3, 2)
    moved = torch.nn.Linear(3, 2)
    moved.load_state_dict(model.state_dict())
    moved.to("neuron")
    assert moved.weight.device == torch.device("neuron:0") and isinstance(moved.weight, torch.nn.Parameter) \
        or moved.weight.device.type == "neuron"
    x = torch.randn(4, 3)
    assert_same(model(x), moved(x.to("neuron")).cpu())
    y = x.to("neuron:1")
    assert y.device == torch.device("neuron", 1)
    assert_same(x * 2, (y * 2).cpu())


def test_ops_run_on_the_core_they_are_on():
    gc.collect()  # earlier tests' cyclic garbage must not be freed between the two readings
    before = torch.neuron.memory_allocated(1)
    y = torch.ones(256, 256, device="neuron:1") @ torch.ones(256, 256, device="neuron:1")
    assert y.device.index == 1
    assert torch.neuron.memory_allocated(1) >= before + 256 * 256 * 4
    held = torch.neuron.memory_allocated(1)
    del y
    gc.collect()
    assert torch.neuron.memory_allocated(1) <= held - 256 * 256 * 4
    y = torch.ones(256, 256, device="neuron:1") @ torch.ones(256, 256, device="neuron:1")
    assert float(y[0, 0]) == 256.0


def test_views_in_place_and_out_variants_match_the_cpu():
    def program(d):
        x = torch.arange(24.0, device=d).reshape(4, 6)
        v = x[1:3, ::2]
        v.mul_(10)                  # in place through a strided view
        x.t()[0].add_(1)            # through a transposed view
        out = torch.empty(4, 6, device=d)
        torch.add(x, 1, out=out)
        y = x.unsqueeze(0).expand(2, 4, 6).sum(0)
        parts = torch.split(x, 2, dim=1)
        return x, out, y, parts[1].contiguous(), x.flatten()[5:9], x.view(6, 4).permute(1, 0)
    cpu, neuron = on_both(program)
    for c, n in zip(cpu, neuron):
        assert_same(c, n)


def test_type_promotion_broadcasting_and_scalars_match_the_cpu():
    def program(d):
        i = torch.arange(6, device=d).reshape(2, 3)
        f = torch.linspace(-1, 1, 3, device=d)
        b = torch.tensor(True, device=d)
        return (i * 2.5, i + f, i // 2, f > 0, (f * torch.tensor(3.0)), i.to(torch.bfloat16) * 3, b & (i > 2),
                torch.where(f > 0, f, 0.0), i.sum(), f.mean(), f.to(torch.float16) + 1)
    cpu, neuron = on_both(program)
    for c, n in zip(cpu, neuron):
        assert c.dtype == n.dtype
        assert_same(c, n, atol=1e-2 if c.dtype in (torch.bfloat16, torch.float16) else ATOL)


def test_item_print_and_numpy_refusal():
    x = torch.tensor([[1.5, 2.0], [3.0, 4.0]], device="neuron")
    assert x[0, 0].item() == 1.5
    assert x.tolist() == [[1.5, 2.0], [3.0, 4.0]] and x[1].tolist() == [3.0, 4.0]
    assert repr(x) == "tensor([[1.5000, 2.0000],\n        [3.0000, 4.0000]], device='neuron:0')"
    assert "requires_grad=True" in repr(x.clone().requires_grad_())
    with pytest.raises(TypeError, match="can't convert neuron:0 device type tensor to numpy. Use Tensor.cpu"):
        x.numpy()
    assert (x.cpu().numpy() == [[1.5, 2.0], [3.0, 4.0]]).all()


def test_mixing_devices_fails_naming_both():
    x = torch.ones(2, device="neuron")
    with pytest.raises(RuntimeError, match=r"found at least two devices, neuron:0 and cpu"):
        x + torch.ones(2)
    with pytest.raises(RuntimeError, match=r"found at least two devices, neuron:0 and neuron:1"):
        x + torch.ones(2, device="neuron:1")
    assert_same((x + torch.tensor(2.0)).cpu(), torch.full((2,), 3.0))  # CPU scalars are allowed, as on CUDA


def test_element_types_trainium_lacks_are_refused():
    with pytest.raises(TypeError, match="float64 is not supported on NeuronCores.*convert with .float()"):
        torch.ones(2, dtype=torch.float64).to("neuron")
    with pytest.raises(TypeError, match="float64 is not supported on NeuronCores"):
        torch.zeros(2, dtype=torch.float64, device="neuron")
    with pytest.raises(TypeError, match="complex tensors .* are not supported on NeuronCores"):
        torch.ones(2, dtype=torch.complex64).to("neuron")


# ------------------------------------------------------------------ memory


def test_memory_figures_follow_the_plugins_hbm_accounting():
    torch.neuron.synchronize()
    before = torch.neuron.memory_allocated()
    x = torch.empty(1 << 20, device="neuron")  # 4 MiB
    assert torch.neuron.memory_allocated() == before + (4 << 20)
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes.all.current"] == before + (4 << 20)
    assert stats["hbm_bytes_limit"] == 16 << 30
    assert torch.neuron.max_memory_allocated() >= before + (4 << 20)
    del x
    assert torch.neuron.memory_allocated() == before
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == before
    torch.neuron.empty_cache()


def test_allocation_over_hbm_is_out_of_memory_naming_the_core():
    with pytest.raises(torch.OutOfMemoryError, match=r"neuron:1 is out of memory: .*NeuronCore 1 is out of HBM"):
        torch.empty(5 << 30, device="neuron:1")  # 20 GiB of float32 on a 16 GiB core
    assert torch.ones(2, device="neuron:1").sum().item() == 2.0  # the core still works


# ------------------------------------------------------------------ save and load


def test_save_and_load_with_map_location():
    x = torch.arange(6.0).reshape(2, 3).to("neuron")
    for location, device in ((None, "neuron:0"), ("neuron:1", "neuron:1"), ("cpu", "cpu"),
                             (torch.device("neuron", 1), "neuron:1")):
        buffer = io.BytesIO()
        torch.save({"x": x, "step": 3}, buffer)
        buffer.seek(0)
        loaded = torch.load(buffer, map_location=location)
        assert str(loaded["x"].device) == device and loaded["step"] == 3
        assert_same(loaded["x"].cpu(), torch.arange(6.0).reshape(2, 3))


def test_state_dict_round_trip_between_cpu_and_neuron():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    on_neuron = torch.load(buffer, map_location="neuron")
    assert all(v.device.type == "neuron" for v in on_neuron.values())
    copy = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).to("neuron")
    copy.load_state_dict(on_neuron)
    back = {k: v.cpu() for k, v in copy.state_dict().items()}
    for key, value in model.state_dict().items():
        assert_same(value, back[key])


# ------------------------------------------------------------------ random numbers


def test_manual_seed_is_reproducible_and_draws_what_the_cpu_draws():
    torch.manual_seed(7)
    first = torch.randn(5, device="neuron").cpu()
    dropped = torch.nn.functional.dropout(torch.ones(8, device="neuron"), 0.5).cpu()
    torch.manual_seed(7)
    assert torch.equal(first, torch.randn(5, device="neuron").cpu())
    assert torch.equal(dropped, torch.nn.functional.dropout(torch.ones(8, device="neuron"), 0.5).cpu())
    torch.manual_seed(7)
    assert torch.equal(first, torch.randn(5))
    state = torch.neuron.get_rng_state()
    a = torch.rand(3, device="neuron").cpu()
    torch.neuron.set_rng_state(state)
    assert torch.equal(a, torch.rand(3, device="neuron").cpu())


# ------------------------------------------------------------------ autograd and optimizers


def test_autograd_through_the_device_matches_the_cpu():
    def program(d):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                    torch.nn.LayerNorm(4 * 6 * 6), torch.nn.Linear(4 * 6 * 6, 5)).to(d)
        x = torch.randn(3, 2, 8, 8).to(d)
        target = torch.tensor([0, 3, 4]).to(d)
        loss = torch.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        return [loss] + [p.grad for p in model.parameters()]
    cpu, neuron = on_both(program)
    for c, n in zip(cpu, neuron):
        assert_same(c, n, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name, make", [
    ("SGD momentum", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
    ("SGD foreach", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True)),
    ("Adam", lambda p: torch.optim.Adam(p, lr=0.01)),
    ("Adam foreach", lambda p: torch.optim.Adam(p, lr=0.01, foreach=True)),
    ("AdamW", lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
    ("AdamW foreach", lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1, foreach=True)),
])
def test_optimizers_train_as_on_the_cpu(name, make):
    def program(d):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).to(d)
        optimizer = make(model.parameters())
        x, y = torch.randn(16, 6).to(d), torch.randn(16, 2).to(d)
        losses = []
        for _ in range(5):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        return torch.stack(losses), [p.detach() for p in model.parameters()]
    (cpu_losses, cpu_params), (neuron_losses, neuron_params) = on_both(program)
    assert_same(cpu_losses, neuron_losses, atol=1e-5, rtol=1e-5)
    for c, n in zip(cpu_params, neuron_params):
        assert_same(c, n, atol=1e-5, rtol=1e-5)


def test_adam_compiles_no_program_per_step():
    from pjrt_neuron.torch_native import _dispatch

    model = torch.nn.Linear(5, 3).to("neuron")
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.randn(4, 5).to("neuron")

    def step():
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()

    for _ in range(2):
        step()
    programs = sum(len(entry.programs) for entry in _dispatch._programs.values())
    for _ in range(5):
        step()  # bias corrections change every step; they reach the programs as inputs
    assert sum(len(entry.programs) for entry in _dispatch._programs.values()) == programs


def test_fused_optimizers_are_refused_with_what_to_use():
    p = torch.nn.Parameter(torch.ones(2).to("neuron"))
    p.grad = torch.ones(2).to("neuron")
    with pytest.raises(NotImplementedError, match="without fused=True"):
        torch.optim.SGD([p], lr=0.1, fused=True).step()


# ------------------------------------------------------------------ ops without a lowering


def test_an_op_without_a_lowering_raises_naming_op_and_device(monkeypatch):
    monkeypatch.delenv("PJRT_NEURON_TORCH_FALLBACK", raising=False)
    x = torch.tensor([0.0, 1.0, 0.0, 2.0], device="neuron")
    with pytest.raises(NotImplementedError, match=r"'aten.nonzero.default' is not implemented for the "
                                                  r"'neuron' device: .*dynamic shapes.*PJRT_NEURON_TORCH_FALLBACK=cpu"):
        x.nonzero()


def test_cpu_fallback_runs_the_op_with_one_warning_per_op(monkeypatch):
    monkeypatch.setenv("PJRT_NEURON_TORCH_FALLBACK", "cpu")
    x = torch.tensor([0.0, 1.0, 0.0, 2.0], device="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = x.nonzero()
        second = x.nonzero()
    assert first.device.type == "neuron"
    assert torch.equal(first.cpu(), torch.tensor([[1], [3]])) and torch.equal(second.cpu(), first.cpu())
    fallbacks = [w for w in caught if "aten.nonzero.default" in str(w.message)]
    assert len(fallbacks) == 1 and "runs on the CPU" in str(fallbacks[0].message)
    assert torch.equal(x[x > 0].cpu(), torch.tensor([1.0, 2.0]))


# ------------------------------------------------------------------ owning the name


@pytest.mark.parametrize("setting, torch_neuronx, owner", [
    ("auto", False, "neuron"), ("off", False, "privateuseone"), ("auto", True, "privateuseone"),
    ("pjrt-neuron", True, "neuron")])
def test_who_owns_the_device_name(tmp_path, setting, torch_neuronx, owner):
    env = {"PJRT_NEURON_TORCH_DEVICE": setting}
    if torch_neuronx:  # a stand-in package: only whether it is installed matters here
        (tmp_path / "torch_neuronx").mkdir()
        (tmp_path / "torch_neuronx" / "__init__.py").write_text("")
        env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    result = run_script("import torch; print(torch._C._get_privateuse1_backend_name())", env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == owner


# ------------------------------------------------------------------ whole programs


def test_digits_example_trains_as_on_the_cpu(tmp_path):
    example = str(REPO / "examples" / "train_digits_native.py")
    runs = {}
    for device in ("cpu", "neuron"):
        result = subprocess.run([sys.executable, example, "--device", device, "--epochs", "8"],
                                capture_output=True, text=True, timeout=600, env=own_instance())
        assert result.returncode in (0, 1), result.stderr
        runs[device] = result.stdout
    def losses(text):
        return [float(line.split("loss")[1]) for line in text.splitlines() if line.startswith("epoch")]
    assert len(losses(runs["neuron"])) == 8
    for c, n in zip(losses(runs["cpu"]), losses(runs["neuron"])):
        assert abs(c - n) <= 1e-4
    accuracy = float(runs["neuron"].rsplit("test accuracy:", 1)[1])
    assert accuracy == float(runs["cpu"].rsplit("test accuracy:", 1)[1]) and accuracy >= 0.95


def test_programs_go_through_the_compile_cache(tmp_path):
    code = """
        import torch
        x = torch.arange(8.0, device="neuron").reshape(2, 4)
        print(float((x @ x.t()).sum()))
    """
    env = {"NEURON_COMPILE_CACHE_URL": str(tmp_path / "cache")}
    first = run_script(code, env)
    assert first.returncode == 0, first.stderr
    entries = list((tmp_path / "cache").rglob("*"))
    assert any(p.is_file() for p in entries)
    second = run_script(code, env)
    x = torch.arange(8.0).reshape(2, 4)
    assert second.stdout == first.stdout == f"{float((x @ x.t()).sum())}\n"


# ------------------------------------------------------------------ the Trainium engine


def test_digits_on_the_trainium_engine_train_as_on_the_simulator(tmp_path):
    """The same eager programs through neuronx-cc and libnrt.so.1 (the stand-in of both in tests/)."""
    from neuron_standin import build
    from test_neuron_engine import framework_env, run_example

    standin = build.build()  # a stand-in that does not build fails here, never skips
    argv = [sys.executable, str(REPO / "examples" / "train_digits_native.py"), "--epochs", "3",
            "--min-accuracy", "0"]
    neuron = run_example(argv, framework_env(standin, tmp_path, "neuron"))
    sim = run_example(argv, framework_env(standin, tmp_path, "sim"))
    assert neuron == sim
    assert float(neuron[0][-1]) < float(neuron[0][0])


# ------------------------------------------------------------------ versions


def test_older_torch_of_the_range_trains_as_the_newest(tmp_path):
    """torch 2.13.0 (installed beside by .ci/install_versions.sh) in front of this venv's torch."""
    versions = Path(os.environ.get("PJRT_NEURON_VERSIONS_DIR", REPO / "build" / "versions"))
    older = versions / "torch-2.13.0"
    if not (older / ".complete").exists():
        if os.environ.get("CI"):
            pytest.fail(f"{older} is missing: .ci/run installs it with .ci/install_versions.sh")
        pytest.skip(f"run .ci/install_versions.sh PYTHON {versions} to install torch 2.13.0 beside this venv")
    argv = [sys.executable, str(REPO / "examples" / "train_digits_native.py"), "--epochs", "3", "--min-accuracy", "0"]
    runs = {}
    for name, extra in (("older", {"PYTHONPATH": str(older)}), ("newest", {})):
        result = subprocess.run(argv, capture_output=True, text=True, timeout=600, env={**own_instance(), **extra})
        assert result.returncode == 0, result.stderr[-3000:]
        runs[name] = [line for line in result.stdout.splitlines() if line.startswith(("epoch", "test accuracy"))]
    version = run_script("import torch; print(torch.__version__)", {"PYTHONPATH": str(older)}).stdout.strip()
    assert version.startswith("2.13.0")
    assert runs["older"] == runs["newest"] and len(runs["older"]) == 4


def test_a_backward_op_without_a_lowering_runs_on_the_cpu_with_a_warning(monkeypatch):
    """In the autograd engine's device thread an error cannot reach the caller (PyTorch's Python
    device guard loses it or aborts), so there the op runs on the CPU, saying so once."""
    monkeypatch.delenv("PJRT_NEURON_TORCH_FALLBACK", raising=False)
    def program(d):
        x = torch.arange(16.0).reshape(4, 4).to(d).requires_grad_()
        torch.diagonal(x * 2).square().sum().backward()
        return x.grad
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cpu, neuron = on_both(program)
    assert_same(cpu, neuron)
    assert any("part of a backward pass" in str(w.message) for w in caught)
