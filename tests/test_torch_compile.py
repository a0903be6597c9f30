"""torch.compile(backend="neuron") on the native device, against the CPU (current PyTorch only)."""

import gc
import json

import pytest

torch = pytest.importorskip("torch")
if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 10):
    pytest.skip("torch.compile on the native neuron device needs torch >= 2.10 (it runs in .ci/run's "
                "current-PyTorch venv)", allow_module_level=True)
pytest.importorskip("torch_mlir")

from test_torch_native import run_script  # noqa: E402


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
    assert b["cache"] != a["cache"], (a["cache"], b["cache"])
    assert json.dumps(b["cache"]).count("hit") >= 1


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
            optimizer.step()
            optimizer.zero_grad()
            losses.append(float(loss))
        return losses

    cpu, neuron = run("cpu", False), run("neuron", True)
    assert neuron == pytest.approx(cpu, rel=1e-5, abs=1e-5)
