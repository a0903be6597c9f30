"""JAX on a plugin library built elsewhere, e.g. by Bazel (.ci/bazel_check.sh).

Runs only when PJRT_NEURON_LIBRARY_PATH names the library to check, so the ordinary test run
(against the installed package) skips it:

    PJRT_NEURON_LIBRARY_PATH=bazel-bin/plugin/libpjrt_neuron.so python -m pytest -q tests/test_bazel_build.py
"""

import os

import numpy as np
import pytest

LIBRARY = os.environ.get("PJRT_NEURON_LIBRARY_PATH")

pytestmark = pytest.mark.skipif(not LIBRARY, reason="PJRT_NEURON_LIBRARY_PATH is not set")


def _mapped_plugin_libraries() -> set[str]:
    """Every libpjrt_neuron.so this process has mapped, as the kernel names it (symlinks resolved)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
    return {p for p in paths if os.path.basename(p) == "libpjrt_neuron.so"}


def test_jax_loads_the_named_library():
    import jax
    import pjrt_neuron

    assert os.path.samefile(pjrt_neuron.library_path(), LIBRARY)
    jax.devices("neuron")  # makes JAX open the plugin if nothing has yet
    assert _mapped_plugin_libraries() == {os.path.realpath(LIBRARY)}


def test_platform_version_names_the_package_version():
    import jax
    import pjrt_neuron

    # PJRT_NEURON_VERSION is compiled in; a build that lost the define would say otherwise.
    version = jax.devices("neuron")[0].client.platform_version
    assert f"pjrt-neuron {pjrt_neuron.__version__}" in version


def test_jit_on_neuron_matches_cpu():
    import jax
    import jax.numpy as jnp

    def f(x, y):
        return jnp.tanh(x @ y) * 2.0 + x.sum(axis=1, keepdims=True)

    x = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    y = np.linspace(0.5, -0.5, 20, dtype=np.float32).reshape(4, 5)
    neuron = jax.devices("neuron")[0]
    got = jax.jit(f)(*jax.device_put((x, y), neuron))
    want = jax.jit(f)(*jax.device_put((x, y), jax.devices("cpu")[0]))
    assert got.devices() == {neuron}  # no silent fallback to CPU
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_a_two_process_job_starts_the_instance_daemon_built_beside_the_library(monkeypatch, tmp_path):
    # The library starts the daemon program from its own directory (bazel-bin/plugin here).
    import pjrt_capi as P
    from programs import ALL_REDUCE
    from test_multiprocess_capi import TWO_REPLICAS, _create_world, _run_together

    monkeypatch.setenv("PJRT_NEURON_LOCK_DIR", str(tmp_path))  # a daemon of its own
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "60")
    clients = _create_world(P.Api(LIBRARY))
    try:
        def rank(index):
            executable = clients[index].compile(ALL_REDUCE, compile_options=TWO_REPLICAS)
            (out,), = executable.execute([clients[index].buffer_from_numpy(np.full(2, index + 1, np.float32))])
            return out.to_numpy()
        for result in _run_together([lambda i=i: rank(i) for i in range(2)]):
            np.testing.assert_array_equal(result, [3.0, 3.0])
    finally:
        for c in clients:
            c.destroy()
    log = next(tmp_path.rglob("daemon.log")).read_text()
    assert "serving 2 NeuronCores" in log
