"""JAX entry point (group ``jax_plugins``): registers platform ``neuron``.

Select it with ``JAX_PLATFORMS=neuron``.
"""

from pjrt_neuron import _jax_engine_guard, _jax_ffi, _jax_lapack, config


def initialize() -> None:
    from jax._src import xla_bridge

    config.prepare_environment()
    _jax_engine_guard.install()  # refuses unreduced axes on an engine build that cannot compute them
    _jax_ffi.install()  # jax.ffi registrations for platform "neuron" reach the plugin's FFI extension
    xla_bridge.register_plugin("neuron", priority=500, library_path=config.library_path(), options=config.client_create_options("jax"))
    _jax_lapack.install()  # eigh, eig, schur...: the CPU's lowering to jaxlib's LAPACK handlers (once "neuron" is known)
