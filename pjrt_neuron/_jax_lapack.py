"""JAX's linear algebra that only LAPACK computes (eigh, eig, schur, hessenberg, tridiagonal,
geqp3: jnp.linalg.eigh, eigvals, svd, scipy.linalg.schur and kin) on NeuronCores.

JAX lowers these primitives for the CPU alone, to typed FFI calls of jaxlib's LAPACK handlers, and
has no rule for other platforms. On platform "neuron" we use the CPU's rule and register jaxlib's
handlers with the plugin's FFI extension, so the simulator runs them with the CPU backend's numbers
on an engine build that runs FFI handlers (the compile error of one that cannot names the build
that can). A NeuronCore runs no host code: the compatibility report lists each such call.
"""

from __future__ import annotations

import warnings

# Primitives JAX lowers only on the CPU, all through LAPACK. Those with a generic lowering
# (cholesky, lu, qr, svd through eigh, triangular_solve) keep it: it runs on every engine build.
LAPACK_ONLY_PRIMITIVES = ("eig", "eigh", "geqp3", "hessenberg", "schur", "tridiagonal")


def install() -> list[str]:
    """Registers the CPU's lowering for platform "neuron" and jaxlib's LAPACK handlers; returns the
    primitives now lowered for NeuronCores (empty where this JAX has none of them)."""
    try:
        from jax._src.interpreters import mlir
        from jax._src.lib import lapack
    except ImportError:
        return []
    cpu_rules = getattr(mlir, "_platform_specific_lowerings", {}).get("cpu", {})
    served = []
    for primitive, entry in list(cpu_rules.items()):
        if primitive.name in LAPACK_ONLY_PRIMITIVES:
            rule, inline = getattr(entry, "rule", entry), getattr(entry, "inline", True)  # JAX 0.7: the rule itself
            mlir.register_lowering(primitive, _registering_handlers_first(rule, lapack), platform="neuron", inline=inline)
            served.append(primitive.name)
    return sorted(served)


def _registering_handlers_first(rule, lapack):
    # Handlers are registered at the first program that needs them, not at start-up: while any
    # FFI handler is registered, programs compile in this process (compile isolation is off).
    def lowering(ctx, *args, **kwargs):
        _register_handlers(lapack)
        return rule(ctx, *args, **kwargs)

    return lowering


_handlers_registered = False


def _register_handlers(lapack) -> None:
    global _handlers_registered
    if _handlers_registered:
        return
    _handlers_registered = True
    from pjrt_neuron import _jax_ffi

    try:
        targets = lapack.registrations().get("cpu", [])
    except Exception as error:  # noqa: BLE001 - a jaxlib without LAPACK leaves the primitives to fail at compile
        warnings.warn(f"pjrt-neuron: jaxlib's LAPACK handlers are not available ({error}); "
                      "eigh, eig and schur will not compile for NeuronCores", stacklevel=3)
        return
    for name, capsule, api_version in targets:
        _jax_ffi.register_handler(name, capsule, "neuron", api_version)
