"""torch.compile(backend="neuron") on the native device, against the CPU (current PyTorch only)."""

import gc
import json
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 10):
    pytest.skip("torch.compile on the native neuron device needs torch >= 2.10 (it runs in .ci/run's "
                "current-PyTorch venv)", allow_module_level=True)
pytest.importorskip("torch_mlir")

from test_torch_native import REPO, own_instance, run_script  # noqa: E402

# The backend module teaches Dynamo about neuron tensors when it is imported; torch.compile(backend=
# "neuron") imports it, a custom backend wrapping it (below) must have it imported first.
import pjrt_neuron.torch_native._compile  # noqa: E402,F401


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 5))


def batches(count):
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(24, 16, generator=generator), torch.randint(0, 5, (24,), generator=generator))
            for _ in range(count)]


def train(device, compiled, steps=3, compile_step=False):
    """Losses and the gradients' norm of each step: the model compiled, or the whole step."""
    model = mlp().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(x, y):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
        optimizer.step()
        optimizer.zero_grad()
        return loss.detach(), norm

    if compiled:
        model = torch.compile(model, backend="neuron")
    run = torch.compile(step, backend="neuron") if compile_step else step
    out = []
    for x, y in batches(steps):
        loss, norm = run(x.to(device), y.to(device))
        out.append((float(loss), float(norm)))
    return out


def test_compiled_model_trains_as_on_the_cpu():
    cpu = train("cpu", compiled=False)
    neuron = train("neuron", compiled=True)
    for (loss_cpu, norm_cpu), (loss_neuron, norm_neuron) in zip(cpu, neuron):
        assert loss_neuron == pytest.approx(loss_cpu, rel=1e-5, abs=1e-6)
        assert norm_neuron == pytest.approx(norm_cpu, rel=1e-5, abs=1e-6)


def test_a_compiled_step_with_the_optimizer_inside_trains_as_on_the_cpu():
    cpu = train("cpu", compiled=False)
    neuron = train("neuron", compiled=False, compile_step=True)
    for (loss_cpu, norm_cpu), (loss_neuron, norm_neuron) in zip(cpu, neuron):
        assert loss_neuron == pytest.approx(loss_cpu, rel=1e-5, abs=1e-6)
        assert norm_neuron == pytest.approx(norm_cpu, rel=1e-5, abs=1e-6)


def test_a_graph_break_runs_eagerly_between_two_compiled_graphs():
    graphs = []

    def count_graphs(graph, example_inputs):
        from pjrt_neuron.torch_native._compile import backend

        graphs.append(graph)
        return backend(graph, example_inputs)

    def f(x, w):
        h = torch.tanh(x @ w)
        torch._dynamo.graph_break()
        return (h * h).sum(dim=1)

    x, w = torch.randn(6, 4), torch.randn(4, 3)
    compiled = torch.compile(f, backend=count_graphs)
    torch.testing.assert_close(compiled(x.to("neuron"), w.to("neuron")).cpu(), f(x, w), rtol=1e-5, atol=1e-6)
    assert len(graphs) == 2


def test_programs_launched_per_compiled_step_are_few():
    from pjrt_neuron.torch_native import _runtime

    model = torch.compile(mlp().to("neuron"), backend="neuron")
    x = torch.randn(24, 16, device="neuron")
    model(x).sum().backward()  # compiles
    runtime = _runtime.runtime()
    launches = []
    launch = runtime.execute
    runtime.execute = lambda *a, **k: launches.append(1) or launch(*a, **k)
    try:
        model(x).sum().backward()
    finally:
        runtime.execute = launch
    eager = []
    plain = mlp().to("neuron")
    plain(x).sum().backward()
    runtime.execute = lambda *a, **k: eager.append(1) or launch(*a, **k)
    try:
        plain(x).sum().backward()
    finally:
        runtime.execute = launch
    # forward + backward programs, the sum and its backward, gradient accumulation; eager runs one an op.
    assert len(launches) < len(eager) / 2, (len(launches), len(eager))


def test_hbm_in_use_does_not_grow_over_compiled_training_steps():
    model = mlp().to("neuron")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled = torch.compile(model, backend="neuron")
    x, y = torch.randn(24, 16, device="neuron"), torch.randint(0, 5, (24,), device="neuron")
    used = []
    for _ in range(20):
        torch.nn.functional.cross_entropy(compiled(x), y).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        gc.collect()  # autograd graphs of compiled steps are freed by the collector, as on CUDA
        used.append(torch.neuron.memory_allocated())
    assert len(set(used[2:])) == 1, used


def test_an_op_without_a_lowering_is_named_at_the_users_line():
    def f(x):
        return torch.special.erfcx(x) + 1

    with pytest.raises(Exception) as raised:
        torch.compile(f, backend="neuron")(torch.rand(5, device="neuron"))
    text = str(raised.value)
    assert "erfcx" in text and "torch.compiler.disable" in text
    assert "test_torch_compile.py" in text


def test_a_new_shape_compiles_a_new_program_and_dynamic_shapes_work():
    def f(x):
        return torch.softmax(x * 3, dim=-1)

    compiled = torch.compile(f, backend="neuron", dynamic=True)
    for rows in (3, 5, 7):
        x = torch.randn(rows, 6)
        torch.testing.assert_close(compiled(x.to("neuron")).cpu(), f(x), rtol=1e-5, atol=1e-6)
    # Training under dynamic shapes: the forward graph also returns sizes for the backward.
    model = mlp()
    neuron_model = mlp().to("neuron")
    compiled_model = torch.compile(neuron_model, backend="neuron", dynamic=True)
    for rows in (3, 5, 7):
        x = torch.randn(rows, 16)
        model(x).pow(2).mean().backward()
        compiled_model(x.to("neuron")).pow(2).mean().backward()
        for cpu_p, neuron_p in zip(model.parameters(), neuron_model.parameters()):
            torch.testing.assert_close(neuron_p.grad.cpu(), cpu_p.grad, rtol=1e-4, atol=1e-6)


def test_the_backend_needs_no_import_and_a_second_process_hits_the_compile_cache(tmp_path):
    code = """
        import json, torch
        from pjrt_neuron import _native
        torch.manual_seed(0)
        model = torch.compile(torch.nn.Linear(8, 3).to("neuron"), backend="neuron")
        out = model(torch.ones(2, 8, device="neuron"))
        print(json.dumps({"sum": float(out.sum()), "cache": _native.compile_cache_metrics()}))
    """
    env = {"NEURON_COMPILE_CACHE_URL": str(tmp_path / "cache")}
    first = run_script(code, env)
    assert first.returncode == 0, first.stderr
    second = run_script(code, env)
    assert second.returncode == 0, second.stderr
    a, b = json.loads(first.stdout.splitlines()[-1]), json.loads(second.stdout.splitlines()[-1])
    assert a["sum"] == b["sum"]
    torch.manual_seed(0)
    assert a["sum"] == pytest.approx(float(torch.nn.Linear(8, 3)(torch.ones(2, 8)).sum()), rel=1e-5)
    assert a["cache"]["compiles"] > 0
    assert b["cache"]["compiles"] == 0 and b["cache"]["cache_hits"] == a["cache"]["compiles"], (a, b)


@pytest.mark.parametrize("name", ["gpt2", "bert", "vit"])
def test_transformers_models_train_compiled_as_on_the_cpu(name):
    transformers = pytest.importorskip("transformers")
    generator = torch.Generator().manual_seed(1)
    if name == "gpt2":
        config = transformers.GPT2Config(vocab_size=500, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
        make = lambda: transformers.GPT2LMHeadModel(config)  # noqa: E731
        ids = torch.randint(0, 500, (2, 12), generator=generator)
        inputs = {"input_ids": ids, "labels": ids}
    elif name == "bert":
        config = transformers.BertConfig(vocab_size=500, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                                         attention_probs_dropout_prob=0.0)
        make = lambda: transformers.BertForMaskedLM(config)  # noqa: E731
        ids = torch.randint(0, 500, (2, 12), generator=generator)
        inputs = {"input_ids": ids, "labels": ids}
    else:
        config = transformers.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                                        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                        num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        make = lambda: transformers.ViTForImageClassification(config)  # noqa: E731
        inputs = {"pixel_values": torch.randn(2, 3, 16, 16, generator=generator),
                  "labels": torch.tensor([0, 2])}

    def run(device, compiled):
        torch.manual_seed(0)
        model = make().to(device)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        step_model = torch.compile(model, backend="neuron") if compiled else model
        losses = []
        for _ in range(3):
            loss = step_model(**{k: v.to(device) for k, v in inputs.items()}).loss
            loss.backward()
            norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()
                                                         if p.grad is not None]))
            optimizer.step()
            optimizer.zero_grad()
            losses.append((float(loss), float(norm)))
        return losses

    cpu, neuron = run("cpu", False), run("neuron", True)
    for (loss_cpu, norm_cpu), (loss_neuron, norm_neuron) in zip(cpu, neuron):
        assert loss_neuron == pytest.approx(loss_cpu, rel=1e-5, abs=1e-5)
        assert norm_neuron == pytest.approx(norm_cpu, rel=1e-4, abs=1e-5)


def test_torchvision_resnet18_trains_compiled_as_on_the_cpu():
    torchvision = pytest.importorskip("torchvision")
    generator = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 3, 32, 32, generator=generator), torch.arange(16) % 5

    def run(device, compiled):
        torch.manual_seed(0)
        model = torchvision.models.resnet18(num_classes=5).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.002, momentum=0.9)
        step_model = torch.compile(model, backend="neuron") if compiled else model
        losses = []
        for _ in range(3):
            loss = torch.nn.functional.cross_entropy(step_model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(float(loss))
        return losses, model.layer4[1].bn2.running_var.cpu()

    (cpu, cpu_var), (neuron, neuron_var) = run("cpu", False), run("neuron", True)
    # The engine sums float32 reductions in another order than PyTorch's CPU kernels; batch norm's
    # gradients over 16 samples magnify that to ~1e-4 after a step (float64 agrees with the CPU).
    assert neuron[0] == pytest.approx(cpu[0], rel=1e-5)
    assert neuron == pytest.approx(cpu, rel=2e-3)
    torch.testing.assert_close(neuron_var, cpu_var, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_autocast_to_bfloat16_trains_as_autocast_on_the_cpu(compiled):
    def run(device):
        model = mlp().to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        step_model = torch.compile(model, backend="neuron") if compiled and device == "neuron" else model
        losses = []
        for x, y in batches(3):
            with torch.autocast(device, dtype=torch.bfloat16):
                logits = step_model(x.to(device))
                loss = torch.nn.functional.cross_entropy(logits, y.to(device))
            assert logits.dtype == torch.bfloat16 and loss.dtype == torch.float32
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(float(loss))
        assert all(p.dtype == torch.float32 and p.grad is None for p in model.parameters())
        return losses

    cpu, neuron = run("cpu"), run("neuron")
    # bfloat16 products: the two devices round in different places (CPU autocast keeps GELU in float32).
    assert neuron == pytest.approx(cpu, rel=2e-3)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        a = torch.randn(4, 4, device="neuron")
        assert (a @ a).dtype == torch.bfloat16 and torch.softmax(a.bfloat16(), 0).dtype == torch.float32


def test_the_estimate_finds_the_compiled_training_step(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to("neuron")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        compiled = torch.compile(model, backend="neuron")
        x, y = torch.randn(64, 64, device="neuron"), torch.randint(0, 10, (64,), device="neuron")
        for _ in range(6):
            torch.nn.functional.cross_entropy(compiled(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
    """))
    result = subprocess.run([sys.executable, "-m", "pjrt_neuron", "estimate", "--", sys.executable, str(script)],
                            capture_output=True, text=True, timeout=600, env=own_instance())
    assert result.returncode == 0, result.stderr[-3000:]
    assert "6 step(s) found" in result.stdout, result.stdout[-3000:]
    assert "cost per million steps" in result.stdout


def digits_losses(argv, env) -> tuple:
    result = subprocess.run([sys.executable, str(REPO / "examples" / "train_digits_native.py"), *argv],
                            capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    losses = [float(line.split("loss")[1]) for line in result.stdout.splitlines() if line.startswith("epoch")]
    return losses, float(result.stdout.rsplit("test accuracy:", 1)[1])


def test_the_digits_example_compiled_trains_as_eagerly_on_the_cpu():
    cpu, cpu_accuracy = digits_losses(["--device", "cpu", "--epochs", "6", "--min-accuracy", "0"], own_instance())
    neuron, accuracy = digits_losses(["--compile", "--epochs", "6", "--min-accuracy", "0"], own_instance())
    assert len(neuron) == 6 and neuron == pytest.approx(cpu, abs=1e-4)
    assert accuracy == cpu_accuracy


def test_the_digits_example_compiled_on_the_trainium_engine_trains_as_on_the_simulator(tmp_path):
    """The compiled step's programs through neuronx-cc and libnrt.so.1 (the stand-in of both in tests/)."""
    from neuron_standin import build
    from test_neuron_engine import framework_env, run_example

    standin = build.build()  # a stand-in that does not build fails here, never skips
    argv = [sys.executable, str(REPO / "examples" / "train_digits_native.py"), "--compile", "--epochs", "3",
            "--min-accuracy", "0"]
    neuron = run_example(argv, framework_env(standin, tmp_path, "neuron"))
    sim = run_example(argv, framework_env(standin, tmp_path, "sim"))
    assert neuron == sim
    assert float(neuron[0][-1]) < float(neuron[0][0])


def test_gpt2_greedy_generation_compiled_gives_the_cpus_tokens():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=500, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                     bos_token_id=0, eos_token_id=1)
    prompt = torch.randint(2, 500, (2, 5), generator=torch.Generator().manual_seed(1))

    def generate(device, compiled):
        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(config).to(device).eval()
        if compiled:  # the KV cache's tensors are made inside the compiled forward
            model.forward = torch.compile(model.forward, backend="neuron")
        return model.generate(prompt.to(device), max_new_tokens=6, do_sample=False, pad_token_id=0).cpu()

    cpu, neuron = generate("cpu", False), generate("neuron", True)
    assert neuron.shape == (2, 11)
    assert torch.equal(neuron, cpu)


def test_trainium_diagnostics_of_a_compiled_graph_name_the_users_line(tmp_path):
    script = tmp_path / "user_code.py"
    script.write_text(textwrap.dedent("""
        import torch

        def f(x):
            y = torch.sin(x) * 2
            return y.argmax(dim=0)

        print(torch.compile(f, backend="neuron")(torch.ones(5, 3, device="neuron")).tolist())
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                            env=own_instance())
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[0, 0, 0]"
    diagnostics = [line for line in result.stderr.splitlines() if "Trainium incompatibility" in line]
    assert any(f"{script}:6" in line and "argmax" in line for line in diagnostics), result.stderr[-3000:]


def test_precompile_fills_the_cache_so_the_next_run_compiles_nothing(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        torch.manual_seed(0)
        model = torch.compile(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                                  torch.nn.Linear(32, 4)).to("neuron"), backend="neuron")
        x = torch.randn(8, 16, device="neuron")
        model(x).sum().backward()
        print(float(model(x).sum()))
    """))
    env = {**own_instance(), "NEURON_COMPILE_CACHE_URL": str(tmp_path / "cache")}
    collect = subprocess.run([sys.executable, "-m", "pjrt_neuron", "precompile", "--", sys.executable, str(script)],
                             capture_output=True, text=True, timeout=600, env=env)
    assert collect.returncode == 0, collect.stderr[-3000:]
    summary = [line for line in (collect.stdout + collect.stderr).splitlines() if "program(s):" in line]
    assert summary and " 0 failed" in summary[-1], collect.stdout[-2000:] + collect.stderr[-2000:]
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                         env={**env, "PJRT_NEURON_CACHE_METRICS": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    metrics = json.loads(run.stderr.split("pjrt-neuron compile cache: ", 1)[1].splitlines()[0])
    assert metrics["compiles"] == 0 and metrics["cache_hits"] > 0, metrics


def test_inputs_a_compiled_graph_writes_are_donated_not_copied():
    from pjrt_neuron.torch_native import _runtime

    weights = torch.zeros(1024, 1024, device="neuron")  # 4 MiB
    momentum = torch.zeros(1024, 1024, device="neuron")

    def update(w, m):
        with torch.no_grad():
            m.mul_(0.9).add_(1.0)
            w.add_(m, alpha=-0.5)

    compiled = torch.compile(update, backend="neuron")
    compiled(weights, momentum)
    gc.collect()
    before = torch.neuron.memory_allocated()
    runtime = _runtime.runtime()
    launch = runtime.execute
    in_step = []

    def execute(*args, **kwargs):
        outputs = launch(*args, **kwargs)
        torch.neuron.synchronize()
        in_step.append(torch.neuron.memory_allocated())
        return outputs

    runtime.execute = execute
    try:
        compiled(weights, momentum)
    finally:
        runtime.execute = launch
    # The program's outputs reuse the inputs' HBM: nothing more is held while it runs.
    assert in_step == [before]
    assert float(momentum[0, 0]) == pytest.approx(1.9)
    assert float(weights[0, 0]) == pytest.approx(-0.5 - 0.5 * 1.9)


def test_batch_norm_and_python_floats_make_no_float64_programs(monkeypatch):
    """NeuronCores have no float64: torch-mlir's batch norm statistics and its float64 scalar
    constants would make neuronx-cc refuse the program."""
    from pjrt_neuron.torch_native import _runtime

    texts = []
    compile_program = _runtime.Runtime.compile
    monkeypatch.setattr(_runtime.Runtime, "compile", lambda self, text: texts.append(text) or compile_program(self, text))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(144, 2))
    x = torch.randn(5, 3, 8, 8)
    expected = model(x).detach()
    model = model.to("neuron")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    out = model(x.to("neuron"))  # eager
    torch.testing.assert_close(out.detach().cpu(), expected, rtol=1e-4, atol=1e-5)
    out.sum().backward()
    optimizer.step()
    compiled = torch.compile(model, backend="neuron")
    compiled(x.to("neuron")).sum().backward()
    optimizer.step()
    model.eval()
    compiled(x.to("neuron"))
    assert len(texts) > 10
    assert [t for t in texts if "f64" in t] == []
