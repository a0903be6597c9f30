"""JAX's layout queries and non-default layouts on the simulated NeuronCores, against JAX's CPU
backend: they go through the plugin's Layouts extension (the engine's, with our handles)."""

import jax
import numpy as np
import pytest
from jax.experimental.layout import Format, Layout


@pytest.fixture(scope="module", params=["neuron", "cpu"])
def device(request):
    return jax.devices(request.param)[0]


X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) - 7.5


def _formats(device):
    placed = jax.device_put(X, device)
    compiled = jax.jit(lambda v: (v.transpose(2, 0, 1) * 2, v.sum(0).astype(np.int8))).lower(placed).compile()
    return placed.format.layout, [f.layout for f in compiled.input_formats[0]], \
        [f.layout for f in compiled.output_formats]


def test_array_and_program_layouts_equal_the_cpu_backend_s():
    assert _formats(jax.devices("neuron")[0]) == _formats(jax.devices("cpu")[0])


def test_device_put_with_a_non_default_layout_keeps_the_values(device):
    sharding = jax.sharding.SingleDeviceSharding(device)
    placed = jax.device_put(X, Format(Layout(major_to_minor=(1, 2, 0)), sharding))
    assert placed.format.layout.major_to_minor == (1, 2, 0)
    np.testing.assert_array_equal(np.asarray(placed), X)


def test_jit_with_non_default_input_and_output_layouts_matches_cpu():
    results = []
    for device in (jax.devices("neuron")[0], jax.devices("cpu")[0]):
        sharding = jax.sharding.SingleDeviceSharding(device)
        f = jax.jit(lambda v: v * 3 - 1,
                    in_shardings=Format(Layout(major_to_minor=(2, 0, 1)), sharding),
                    out_shardings=Format(Layout(major_to_minor=(1, 0, 2)), sharding))
        arg = jax.device_put(X, Format(Layout(major_to_minor=(2, 0, 1)), sharding))
        out = f(arg)
        assert out.format.layout.major_to_minor == (1, 0, 2) and out.devices() == {device}
        results.append(np.asarray(out))
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], X * 3 - 1)
