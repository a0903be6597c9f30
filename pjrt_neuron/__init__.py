"""pjrt-neuron: AWS Trainium NeuronCores as XLA devices, simulated where there is no Trainium.

Frameworks find the plugin through entry points (``jax_plugins`` and ``torch_xla.plugins``);
nothing here needs to be imported by user code.
"""

import importlib.metadata

from pjrt_neuron.config import engine_library_path, library_path, prepare_environment
from pjrt_neuron.estimation.hook import estimate_block

try:
    # One version: pyproject.toml's, which the build also compiles into the library.
    __version__ = importlib.metadata.version("pjrt-neuron")
except importlib.metadata.PackageNotFoundError:
    # A source checkout that was never installed has no metadata; `pip install .` gives it one.
    __version__ = "0+unknown"


def estimate(instances=None, unit="steps", per_step=1.0, prices=None, auto_cast="none", baseline=None):
    """The Trainium estimate of what runs inside a `with` block (pjrt_neuron/estimation/):

        with pjrt_neuron.estimate(["trn1.2xlarge", "trn2.48xlarge"], unit="samples", per_step=256) as e:
            train()
        print(e)            # the table `pjrt-neuron estimate` prints; e.instances for the figures
    """
    return estimate_block(instances, unit, per_step, prices, auto_cast, baseline)


__all__ = ["__version__", "engine_library_path", "estimate", "library_path", "prepare_environment"]
