"""pjrt-neuron: AWS Trainium NeuronCores as XLA devices, simulated where there is no Trainium.

Frameworks find the plugin through entry points (``jax_plugins`` and ``torch_xla.plugins``);
nothing here needs to be imported by user code.
"""

import importlib.metadata

from pjrt_neuron.config import engine_library_path, library_path, prepare_environment

try:
    # One version: pyproject.toml's, which the build also compiles into the library.
    __version__ = importlib.metadata.version("pjrt-neuron")
except importlib.metadata.PackageNotFoundError:
    # A source checkout that was never installed has no metadata; `pip install .` gives it one.
    __version__ = "0+unknown"
__all__ = ["__version__", "engine_library_path", "library_path", "prepare_environment"]
