"""JAX on the simulated NeuronCores, checked against JAX's own CPU backend.

conftest.py sets JAX_PLATFORMS=neuron,cpu before JAX is imported, so both backends live in
this process.  Each computation is jitted once per backend: inputs are committed to a device
with ``jax.device_put`` and jit follows them, so the same traced program runs on both.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

GIB = 1 << 30


@pytest.fixture(scope="module")
def neuron():
    return jax.devices("neuron")


@pytest.fixture(scope="module")
def cpu():
    return jax.devices("cpu")[0]


def run_on(device, f, *args):
    """Runs jit(f) with every array argument committed to `device`; returns the device result."""
    placed = jax.device_put(args, device)
    return jax.jit(f)(*placed)


def run_both(f, *args, device=None):
    """Same jitted function on neuron (core 0 unless `device`) and on CPU, results as numpy."""
    dev = device if device is not None else jax.devices("neuron")[0]
    on_neuron = run_on(dev, f, *args)
    on_cpu = run_on(jax.devices("cpu")[0], f, *args)
    # The result must stay where its inputs were; a silent fallback to CPU would hide the plugin.
    for leaf in jax.tree.leaves(on_neuron):
        assert leaf.devices() == {dev}
    return jax.tree.map(np.asarray, on_neuron), jax.tree.map(np.asarray, on_cpu)


def assert_same(got, want, rtol=0.0, atol=0.0):
    """Exact (default) or close comparison over pytrees; dtype and shape must match too."""
    got_leaves, got_tree = jax.tree.flatten(got)
    want_leaves, want_tree = jax.tree.flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert g.dtype == w.dtype and g.shape == w.shape
        if rtol == 0.0 and atol == 0.0:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=rtol, atol=atol)


# ---------------------------------------------------------------- devices


def test_two_neuroncores_are_listed(neuron):
    assert len(neuron) == 2
    assert [d.id for d in neuron] == [0, 1]
    for d in neuron:
        assert d.platform == "neuron"
        assert d.device_kind == "NeuronCore-v2"
        assert d.process_index == 0


def test_device_string_names_the_core(neuron):
    assert str(neuron[0]) == "NeuronCore-v2 0 of trn1.2xlarge (chip 0, core 0, 16 GiB HBM, simulated)"
    assert repr(neuron[1]) == "NeuronCore(id=1, chip=0, core=1)"


def test_memory_stats_report_usage_and_16gib_limit(neuron):
    stats = neuron[0].memory_stats()
    assert stats["bytes_limit"] == 16 * GIB
    assert stats["bytes_in_use"] >= 0


def test_memory_stats_hold_only_plausible_values(neuron):
    # Stats the plugin does not track must be absent, not filled with whatever was in memory.
    stats = neuron[0].memory_stats()
    for key, value in stats.items():
        assert 0 <= value <= 16 * GIB, f"memory_stats()[{key!r}] = {value}"


def test_memory_stats_count_a_live_array(neuron):
    before = neuron[1].memory_stats()["bytes_in_use"]
    x = jax.device_put(np.zeros((1024, 256), np.float32), neuron[1])  # 1 MiB
    x.block_until_ready()
    during = neuron[1].memory_stats()["bytes_in_use"]
    assert during - before >= 1 << 20
    x.delete()
    assert neuron[1].memory_stats()["bytes_in_use"] == before


def test_default_backend_is_neuron_when_listed_first():
    assert os.environ["JAX_PLATFORMS"].split(",")[0] == "neuron"
    assert jax.default_backend() == "neuron"
    assert jax.devices()[0].platform == "neuron"


# ---------------------------------------------------------------- elementwise

ELEMENTWISE_INPUTS = {
    "float32": (np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6),
                np.linspace(0.5, 2, 24, dtype=np.float32).reshape(4, 6)),
    "bfloat16": (np.linspace(-3, 3, 24).astype(jnp.bfloat16).reshape(4, 6),
                 np.linspace(0.5, 2, 24).astype(jnp.bfloat16).reshape(4, 6)),
    "int32": (np.arange(-12, 12, dtype=np.int32).reshape(4, 6),
              np.arange(1, 25, dtype=np.int32).reshape(4, 6)),
    "bool": (np.arange(24).reshape(4, 6) % 2 == 0,
             np.arange(24).reshape(4, 6) % 3 == 0),
}


def float_elementwise(a, b):
    return {
        "add": a + b, "sub": a - b, "mul": a * b, "div": a / b, "neg": -a,
        "max": jnp.maximum(a, b), "abs": jnp.abs(a), "lt": a < b,
        "exp": jnp.exp(a), "log": jnp.log(b), "tanh": jnp.tanh(a), "sqrt": jnp.sqrt(b),
        "sin": jnp.sin(a), "pow": b ** a, "where": jnp.where(a > 0, a, b),
    }


def int_elementwise(a, b):
    return {
        "add": a + b, "sub": a - b, "mul": a * b, "floordiv": a // b, "rem": a % b,
        "neg": -a, "max": jnp.maximum(a, b), "abs": jnp.abs(a), "eq": a == b,
        "and": a & b, "xor": a ^ b, "shift": a << 2, "cast": a.astype(jnp.float32),
    }


def bool_elementwise(a, b):
    return {"and": a & b, "or": a | b, "xor": a ^ b, "not": ~a, "eq": a == b,
            "where": jnp.where(a, 1, 2), "cast": a.astype(jnp.int32)}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_float_elementwise_matches_cpu(dtype):
    a, b = ELEMENTWISE_INPUTS[dtype]
    got, want = run_both(float_elementwise, a, b)
    # Both backends compile with XLA CPU, but transcendental approximations may differ by an ulp.
    rtol = 1e-6 if dtype == "float32" else 1e-2
    assert_same(got, want, rtol=rtol, atol=1e-6)


def test_int32_elementwise_matches_cpu_exactly():
    got, want = run_both(int_elementwise, *ELEMENTWISE_INPUTS["int32"])
    assert_same(got, want)


def test_bool_elementwise_matches_cpu_exactly():
    got, want = run_both(bool_elementwise, *ELEMENTWISE_INPUTS["bool"])
    assert_same(got, want)


def test_elementwise_on_second_core_matches_cpu(neuron):
    got, want = run_both(float_elementwise, *ELEMENTWISE_INPUTS["float32"], device=neuron[1])
    assert_same(got, want, rtol=1e-6, atol=1e-6)


def test_small_integer_and_unsigned_dtypes_match_cpu_exactly():
    a = np.arange(-8, 8, dtype=np.int8)
    b = np.arange(16, dtype=np.uint8)
    c = np.arange(16, dtype=np.uint32) * 300_000_000
    got, want = run_both(lambda a, b, c: (a * 3, b * 17, c + c, a.astype(jnp.uint8)), a, b, c)
    assert_same(got, want)


def test_float16_elementwise_matches_cpu():
    a = np.linspace(-2, 2, 16, dtype=np.float16)
    got, want = run_both(lambda a: (a * a + 1, jnp.exp(a)), a)
    assert_same(got, want, rtol=1e-3)


# ---------------------------------------------------------------- linear algebra and reductions


def test_matmul_float32_matches_cpu():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 32), dtype=np.float32)
    b = rng.standard_normal((32, 8), dtype=np.float32)
    got, want = run_both(jnp.matmul, a, b)
    assert_same(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_bfloat16_matches_cpu():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 32)).astype(jnp.bfloat16)
    b = rng.standard_normal((32, 8)).astype(jnp.bfloat16)
    got, want = run_both(jnp.matmul, a, b)
    assert got.dtype == jnp.bfloat16
    assert_same(got, want, rtol=2e-2, atol=2e-2)


def test_batched_einsum_matches_cpu():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4, 5), dtype=np.float32)
    b = rng.standard_normal((3, 5, 6), dtype=np.float32)
    got, want = run_both(lambda a, b: jnp.einsum("bij,bjk->bik", a, b), a, b)
    assert_same(got, want, rtol=1e-5, atol=1e-5)


def test_reductions_match_cpu():
    x = np.random.default_rng(3).standard_normal((8, 33), dtype=np.float32)

    def reduce(x):
        return {"sum": x.sum(), "sum0": x.sum(axis=0), "max": x.max(axis=1), "min": x.min(),
                "mean": x.mean(axis=1), "argmax": jnp.argmax(x, axis=1), "argmin": jnp.argmin(x),
                "prod": jnp.prod(x[:, :4], axis=1), "logsumexp": jax.nn.logsumexp(x, axis=1),
                "cumsum": jnp.cumsum(x, axis=1)}

    got, want = run_both(reduce, x)
    assert_same({k: got[k] for k in ("argmax", "argmin")}, {k: want[k] for k in ("argmax", "argmin")})
    assert_same(got, want, rtol=1e-5, atol=1e-5)


def test_integer_reductions_match_cpu_exactly():
    x = np.arange(-50, 50, dtype=np.int32).reshape(10, 10) * 7
    got, want = run_both(lambda x: (x.sum(), x.max(axis=0), x.min(axis=1), jnp.any(x > 300), jnp.all(x != 0)), x)
    assert_same(got, want)


# ---------------------------------------------------------------- control flow


def test_while_loop_matches_cpu():
    # Collatz steps: data-dependent trip count.
    def steps(n):
        def body(state):
            n, k = state
            return jnp.where(n % 2 == 0, n // 2, 3 * n + 1), k + 1
        return lax.while_loop(lambda s: s[0] != 1, body, (n, jnp.int32(0)))[1]

    for n in (1, 6, 27):
        got, want = run_both(steps, np.int32(n))
        assert_same(got, want)
    assert int(got) == 111  # 27 takes 111 steps


def test_fori_loop_float_accumulation_matches_cpu():
    f = lambda x: lax.fori_loop(0, 10, lambda i, acc: acc * 0.9 + jnp.sin(acc + i), x)
    got, want = run_both(f, np.linspace(0, 1, 7, dtype=np.float32))
    assert_same(got, want, rtol=1e-6, atol=1e-6)


def test_cond_takes_each_branch_like_cpu():
    f = lambda p, x: lax.cond(p, lambda x: x * 2.0, lambda x: x - 100.0, x)
    x = np.arange(5, dtype=np.float32)
    for p in (True, False):
        got, want = run_both(f, np.bool_(p), x)
        assert_same(got, want)
    assert_same(got, x - 100.0)


def test_switch_matches_cpu():
    branches = [lambda x: x + 1, lambda x: x * x, lambda x: -x]
    f = lambda i, x: lax.switch(i, branches, x)
    for i in range(3):
        got, want = run_both(f, np.int32(i), np.arange(4, dtype=np.int32))
        assert_same(got, want)


def test_scan_matches_cpu():
    def running(xs):
        def step(carry, x):
            carry = carry * 0.5 + x
            return carry, carry * 2
        return lax.scan(step, jnp.zeros(3, jnp.float32), xs)

    xs = np.arange(30, dtype=np.float32).reshape(10, 3)
    got, want = run_both(running, xs)
    assert_same(got, want, rtol=1e-6)


# ---------------------------------------------------------------- random numbers


def test_random_bits_are_identical_to_cpu():
    def draw(key):
        k1, k2, k3 = jax.random.split(key, 3)
        return (jax.random.normal(k1, (5, 7)), jax.random.uniform(k2, (64,)),
                jax.random.randint(k3, (32,), -1000, 1000), jax.random.bits(k1, (8,)))

    key = jax.random.key_data(jax.random.key(42))
    got, want = run_both(lambda k: draw(jax.random.wrap_key_data(k)), key)
    # Threefry is integer arithmetic; the float transforms are exact on both sides.
    assert_same(got, want)


def test_random_with_typed_key_array_matches_cpu():
    got, want = run_both(lambda k: jax.random.normal(k, (16,)), jax.random.key(7))
    assert_same(got, want)


def test_random_permutation_matches_cpu():
    got, want = run_both(lambda k: jax.random.permutation(k, 50), jax.random.key(3))
    assert_same(got, want)
    assert sorted(got.tolist()) == list(range(50))


# ---------------------------------------------------------------- indexing


def test_gather_matches_cpu():
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    idx = np.array([7, 0, 3, 3, 9], np.int32)
    got, want = run_both(lambda x, i: (x[i], x[i, 2], jnp.take(x, i, axis=1, mode="clip")), x, idx)
    assert_same(got, want)


def test_scatter_add_accumulates_duplicates_like_cpu():
    x = np.zeros(6, np.float32)
    idx = np.array([1, 3, 1, 5, 1], np.int32)
    v = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    got, want = run_both(lambda x, i, v: (x.at[i].add(v), x.at[i].max(v), x.at[2].set(7.0)), x, idx, v)
    assert_same(got, want)
    assert_same(got[0], np.array([0, 9, 0, 2, 0, 4], np.float32))


def test_dynamic_slice_and_update_match_cpu():
    x = np.arange(64, dtype=np.int32).reshape(8, 8)
    f = lambda x, i: (lax.dynamic_slice(x, (i, i), (3, 3)),
                      lax.dynamic_update_slice(x, jnp.full((2, 2), -1, x.dtype), (i, 0)))
    got, want = run_both(f, x, np.int32(5))
    assert_same(got, want)


# ---------------------------------------------------------------- sort


def test_sort_and_argsort_match_cpu():
    x = np.random.default_rng(4).standard_normal((4, 17)).astype(np.float32)
    x[0, :3] = 0.5  # ties: argsort is stable, so indices must match too
    got, want = run_both(lambda x: (jnp.sort(x, axis=1), jnp.argsort(x, axis=1), jnp.sort(x, axis=0)), x)
    assert_same(got, want)


def test_integer_sort_and_top_k_match_cpu():
    x = np.random.default_rng(5).integers(-100, 100, size=40).astype(np.int32)
    got, want = run_both(lambda x: (jnp.sort(x), lax.top_k(x, 5)), x)
    assert_same(got, want)


# ---------------------------------------------------------------- convolution


def test_conv_nchw_oihw_matches_cpu():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 10, 9), dtype=np.float32)
    w = rng.standard_normal((5, 3, 3, 3), dtype=np.float32)

    def conv(x, w):
        plain = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        strided = lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (0, 2)), rhs_dilation=(1, 2),
                                           dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return plain, strided

    got, want = run_both(conv, x, w)
    assert got[0].shape == (2, 5, 10, 9)
    assert_same(got, want, rtol=1e-5, atol=1e-5)


def test_grouped_conv_matches_cpu():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 4, 8, 8), dtype=np.float32)
    w = rng.standard_normal((4, 1, 3, 3), dtype=np.float32)  # depthwise
    f = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID", feature_group_count=4,
                                              dimension_numbers=("NCHW", "OIHW", "NCHW"))
    got, want = run_both(f, x, w)
    assert_same(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- autodiff


def mlp_loss(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


def test_mlp_grad_matches_cpu():
    rng = np.random.default_rng(8)
    params = {"w1": rng.standard_normal((8, 16), dtype=np.float32) * 0.3, "b1": np.zeros(16, np.float32),
              "w2": rng.standard_normal((16, 4), dtype=np.float32) * 0.3, "b2": np.zeros(4, np.float32)}
    x = rng.standard_normal((12, 8), dtype=np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 12)]
    got, want = run_both(jax.value_and_grad(mlp_loss), params, x, y)
    assert_same(got, want, rtol=1e-5, atol=1e-6)


def test_sgd_steps_reduce_loss_like_cpu():
    rng = np.random.default_rng(9)
    params = {"w1": rng.standard_normal((8, 16), dtype=np.float32) * 0.3, "b1": np.zeros(16, np.float32),
              "w2": rng.standard_normal((16, 4), dtype=np.float32) * 0.3, "b2": np.zeros(4, np.float32)}
    x = rng.standard_normal((12, 8), dtype=np.float32)
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 12)]

    def train(params, x, y):
        def step(p, _):
            loss, g = jax.value_and_grad(mlp_loss)(p, x, y)
            return jax.tree.map(lambda a, b: a - 0.5 * b, p, g), loss
        return lax.scan(step, params, None, length=20)

    (got_params, got_losses), (want_params, want_losses) = run_both(train, params, x, y)
    assert got_losses[-1] < got_losses[0]
    assert_same((got_params, got_losses), (want_params, want_losses), rtol=1e-4, atol=1e-5)


def test_vmap_of_jacobian_matches_cpu():
    f = lambda x: jax.vmap(jax.jacfwd(lambda v: jnp.sin(v) * v.sum()))(x)
    got, want = run_both(f, np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    assert_same(got, want, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- buffers and transfers


def test_donated_input_is_deleted(neuron):
    x = jax.device_put(np.arange(8, dtype=np.float32), neuron[0])
    y = jax.jit(lambda a: a * 3, donate_argnums=0)(x)
    np.testing.assert_array_equal(np.asarray(y), np.arange(8, dtype=np.float32) * 3)
    assert x.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(x)


def test_explicit_delete_frees_the_array(neuron):
    x = jax.device_put(np.ones(4, np.int32), neuron[0])
    assert not x.is_deleted()
    x.delete()
    assert x.is_deleted()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16, np.int8, np.uint8, np.int16,
                                   np.int32, np.uint32, np.int64, np.bool_, np.complex64])
@pytest.mark.parametrize("core", [0, 1])
def test_device_put_get_round_trip(neuron, dtype, core):
    # int64 becomes int32 with x64 off; the round trip must keep whatever dtype JAX chose.
    host = (np.arange(-5, 19).reshape(2, 3, 4) % 7).astype(dtype)
    x = jax.device_put(host, neuron[core])
    assert x.devices() == {neuron[core]}
    back = jax.device_get(x)
    assert back.dtype == jnp.asarray(host).dtype
    np.testing.assert_array_equal(back, host.astype(back.dtype))


def test_non_contiguous_host_array_round_trips(neuron):
    host = np.arange(60, dtype=np.float32).reshape(6, 10)[::2, 1::3]  # strided view
    x = jax.device_put(host, neuron[0])
    np.testing.assert_array_equal(np.asarray(x), host)
    np.testing.assert_array_equal(np.asarray(jax.device_put(host.T, neuron[1])), host.T)


def test_scalar_round_trip(neuron):
    x = jax.device_put(np.float32(2.5), neuron[1])
    assert x.shape == ()
    assert float(x) == 2.5
    assert int(jax.device_put(np.int32(-7), neuron[0])) == -7


def test_array_moves_between_neuroncores(neuron):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = jax.device_put(host, neuron[0])
    y = jax.device_put(x, neuron[1])
    assert y.devices() == {neuron[1]}
    np.testing.assert_array_equal(np.asarray(y), host)
    # The copy is usable on its new core and independent of the original.
    z = jax.jit(lambda a: a + 1)(y)
    assert z.devices() == {neuron[1]}
    x.delete()
    np.testing.assert_array_equal(np.asarray(z), host + 1)


def test_array_moves_between_neuron_and_cpu(neuron, cpu):
    host = np.arange(10, dtype=np.int32)
    on_cpu = jax.device_put(jax.device_put(host, neuron[1]), cpu)
    assert on_cpu.devices() == {cpu}
    back = jax.device_put(on_cpu, neuron[0])
    assert back.devices() == {neuron[0]}
    np.testing.assert_array_equal(np.asarray(back), host)


def test_block_until_ready_returns_finished_results(neuron):
    x = jax.device_put(np.ones((64, 64), np.float32), neuron[0])
    out = jax.jit(lambda a: {"m": a @ a, "s": a.sum()})(x)
    ready = jax.block_until_ready(out)
    assert ready is out
    np.testing.assert_array_equal(np.asarray(out["m"]), np.full((64, 64), 64, np.float32))
    assert float(out["s"]) == 4096.0
    assert x.block_until_ready() is x


def test_zero_element_shapes_match_cpu():
    a = np.zeros((0, 5), np.float32)
    b = np.zeros((5, 0), np.float32)
    # b @ a contracts over an empty axis, so it is all zeros.
    f = lambda a, b: (a + 1, a.sum(axis=0), a @ b, b @ a, jnp.concatenate([a, a]), a.max(axis=1), a.reshape(5, 0))
    got, want = run_both(f, a, b)
    assert_same(got, want)
    assert got[1].shape == (5,) and got[2].shape == (0, 0)
    assert_same(got[3], np.zeros((5, 5), np.float32))


def test_zero_element_round_trip(neuron):
    x = jax.device_put(np.zeros((3, 0, 2), np.int32), neuron[1])
    assert x.shape == (3, 0, 2)
    assert jax.device_get(x).shape == (3, 0, 2)


# Programs with no results at all: JAX runs them (dtype probes, effects-only helpers) with
# null or empty output lists.
EMPTY_RESULTS = {"none": lambda x: None, "tuple": lambda x: (), "dict": lambda x: {},
                 "nested": lambda x: ((), {"a": []})}


@pytest.mark.parametrize("name", sorted(EMPTY_RESULTS))
def test_program_without_results_runs_like_cpu(neuron, cpu, name):
    f = jax.jit(EMPTY_RESULTS[name])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = f(jax.device_put(x, neuron[1]))
    assert got == f(jax.device_put(x, cpu))
    assert jax.tree.leaves(got) == []


def test_program_without_arguments_or_results_runs(neuron):
    assert jax.jit(lambda: (), device=neuron[0])() == ()
    got = jax.jit(lambda: jnp.arange(3) * 2, device=neuron[0])()
    assert got.devices() == {neuron[0]}
    np.testing.assert_array_equal(got, jax.jit(lambda: jnp.arange(3) * 2, device=jax.devices("cpu")[0])())


def test_empty_results_under_vmap_grad_pmap_and_shard_map(neuron, cpu):
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert jax.vmap(jax.jit(lambda r: ()))(jax.device_put(x, neuron[0])) == ()
    assert jax.pmap(lambda r: (), devices=neuron)(x) == ()
    mesh = Mesh(np.array(neuron), ("i",))
    f = jax.jit(jax.shard_map(lambda r: (), mesh=mesh, in_specs=PartitionSpec("i"), out_specs=()))
    assert f(jax.device_put(x, NamedSharding(mesh, PartitionSpec("i")))) == ()

    def loss(v):
        jax.jit(lambda w: ())(v)  # an inner program with nothing to return
        return jnp.sum(v * v)

    got, want = run_both(jax.grad(loss), x)
    assert_same(got, want)


def test_profiler_trace_has_a_line_per_neuroncore_and_a_span_per_execution(neuron, tmp_path):
    f = jax.jit(lambda x: jnp.tanh(x @ x.T).sum())
    xs = [jax.device_put(np.ones((16, 16), np.float32), d) for d in neuron]
    for x in xs:
        f(x).block_until_ready()  # compiled outside the trace
    with jax.profiler.trace(str(tmp_path)):
        for _ in range(3):
            f(xs[0]).block_until_ready()
        f(xs[1]).block_until_ready()
    (path,) = tmp_path.glob("**/*.xplane.pb")
    planes = {p.name: p for p in jax.profiler.ProfileData.from_file(str(path)).planes}
    spans = {}
    for name in ("/device:NEURON:0", "/device:NEURON:1"):
        (line,) = planes[name].lines
        spans[name] = [e for e in line.events]
        assert all(e.name == "jit__lambda" and e.duration_ns > 0 for e in spans[name])
    assert [len(v) for v in spans.values()] == [3, 1]
    # Spans of one core follow each other in time.
    starts = [e.start_ns for e in spans["/device:NEURON:0"]]
    assert starts == sorted(starts)


def test_devices_have_tpu_style_coords(neuron):
    assert [d.coords for d in neuron] == [[0, 0, 0], [0, 0, 0]]


def test_many_inputs_and_outputs_pytree_matches_cpu():
    rng = np.random.default_rng(10)
    inputs = {f"x{i:02d}": rng.standard_normal((i % 4 + 1, 3)).astype(np.float32) for i in range(16)}
    inputs["ints"] = [np.arange(i + 2, dtype=np.int32) for i in range(4)]  # 20 leaves in total

    def f(tree):
        xs = [tree[f"x{i:02d}"] for i in range(16)]
        outs = {f"y{i}": xs[i] * xs[i + 1].sum() + xs[15 - i].mean() for i in range(8)}
        outs["total"] = sum(x.sum() for x in xs)
        outs["ints"] = tuple(v.cumsum() for v in tree["ints"][:1])  # 10 outputs in total
        return outs

    got, want = run_both(f, inputs)
    assert len(jax.tree.leaves(got)) == 10
    assert_same(got, want, rtol=1e-6, atol=1e-6)


def test_same_executable_reused_with_new_inputs(neuron):
    f = jax.jit(lambda a, b: a * b - 1)
    for k in range(5):
        a = jax.device_put(np.full(6, k, np.int32), neuron[k % 2])
        b = jax.device_put(np.arange(6, dtype=np.int32), neuron[k % 2])
        np.testing.assert_array_equal(np.asarray(f(a, b)), np.arange(6) * k - 1)


def test_uncommitted_arrays_default_to_neuron_core_0(neuron):
    out = jax.jit(lambda a: a + 1)(jnp.arange(3))
    assert out.devices() == {neuron[0]}
    np.testing.assert_array_equal(np.asarray(out), [1, 2, 3])


# ---------------------------------------------------------------- errors


def test_jit_with_arrays_on_two_cores_raises(neuron):
    a = jax.device_put(np.ones(3, np.float32), neuron[0])
    b = jax.device_put(np.ones(3, np.float32), neuron[1])
    with pytest.raises(ValueError, match="incompatible devices"):
        jax.jit(lambda a, b: a + b)(a, b)


def test_unknown_custom_call_fails_with_a_python_exception(neuron):
    # A compile error inside the plugin must surface as an exception, not abort the process.
    def f(x):
        return jax.ffi.ffi_call("pjrt_neuron_no_such_target", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    x = jax.device_put(np.ones(3, np.float32), neuron[0])
    with pytest.raises(jax.errors.JaxRuntimeError, match="No FFI handler registered for pjrt_neuron_no_such_target"):
        jax.jit(f)(x).block_until_ready()
    # The client still works afterwards.
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda a: a * 2)(x)), [2, 2, 2])
