"""Shared test set-up.

JAX sees both platforms in one process (``neuron`` for the plugin, ``cpu`` as the reference).
torch-xla picks its device once per process, so its tests run scripts in subprocesses.
"""

import os
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("JAX_PLATFORMS", "neuron,cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
# The tests are written for the whole default instance: under `pytest -n`, each worker
# simulates one of its own (the package's pytest plugin reads this).
os.environ.setdefault("PJRT_NEURON_XDIST", "instance")
# NeuronCores are exclusive between processes; the test session gets an instance of its own.
os.environ["PJRT_NEURON_LOCK_DIR"] = tempfile.mkdtemp(prefix="pjrt-neuron-test-locks-")
# A compile cache of the session's own, so no test sees another run's entries.
os.environ["NEURON_COMPILE_CACHE_URL"] = tempfile.mkdtemp(prefix="pjrt-neuron-test-cache-")

import pjrt_neuron  # noqa: E402

pjrt_neuron.prepare_environment()

TESTS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS_DIR))

import pjrt_capi  # noqa: E402


@pytest.fixture(scope="session")
def plugin_api():
    """The plugin loaded through our own ctypes PJRT client."""
    return pjrt_capi.Api(pjrt_neuron.library_path())


@pytest.fixture
def client(plugin_api):
    """A fresh client on the default simulated instance (trn1.2xlarge, 2 NeuronCores)."""
    c = pjrt_capi.Client(plugin_api)
    yield c
    c.close()


@pytest.fixture(scope="session")
def cpu_api():
    """The stock XLA CPU plugin: the reference our simulated cores must match."""
    return pjrt_capi.Api(pjrt_capi.cpu_plugin_path())


@pytest.fixture(scope="session")
def engine_api():
    """The XLA CPU build the plugin's C API clients run on (PJRT_NEURON_SIM_ENGINE, or auto's):
    the reference where the plugin passes on what its engine says."""
    import pjrt_neuron.config as config
    return pjrt_capi.Api(config.engine_library_path("capi"))


@pytest.fixture
def engine_client(engine_api):
    c = pjrt_capi.Client(engine_api)
    yield c
    c.close()


@pytest.fixture
def cpu_client(cpu_api):
    """A fresh client of the stock XLA CPU plugin (one device), the reference for a test."""
    c = pjrt_capi.Client(cpu_api)
    yield c
    c.close()


@pytest.fixture(scope="module")
def standin():
    """The Neuron stand-in (neuronx-cc + libnrt.so.1), built once per checkout. A stand-in that does
    not build fails the tests that need it: skipping them would leave the Trainium engine untested
    with CI green."""
    from neuron_standin import build

    try:
        return build.build()
    except build.BuildError as error:
        pytest.fail(f"the Neuron stand-in does not build, so the Trainium engine cannot be tested: {error}")
