"""pjrt-neuron: AWS Trainium NeuronCores as XLA devices, simulated where there is no Trainium.

Frameworks find the plugin through entry points (``jax_plugins`` and ``torch_xla.plugins``);
nothing here needs to be imported by user code.
"""

from pjrt_neuron.config import engine_library_path, library_path, prepare_environment

__version__ = "0.1.0"
__all__ = ["__version__", "engine_library_path", "library_path", "prepare_environment"]
