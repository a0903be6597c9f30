"""JAX entry point (group ``jax_plugins``): registers platform ``neuron``.

Select it with ``JAX_PLATFORMS=neuron``.
"""

from pjrt_neuron import config


def initialize() -> None:
    from jax._src import xla_bridge

    config.prepare_environment()
    xla_bridge.register_plugin("neuron", priority=500, library_path=config.library_path(), options=config.client_create_options("jax"))
