"""Refuses, at compile time, JAX programs that the older simulator engine would compute wrongly.

xla-cpu-pjrt 0.0.1 (XLA of November 2025) reads Shardy's unreduced and reduced axes as replicated:
a partial sum on each core counts as the whole (issue 30: [6, 6] where the CPU backend gives
[6, 0]). Its StableHLO arrives as bytecode the plugin cannot read, so the check runs here, on
the module JAX is about to compile. It wraps a private JAX function (checked on JAX 0.7.2 to
0.10.2); where that function is missing the guard is off and says so in `installed()`.
"""

from __future__ import annotations

import re

# The engine description in the platform version: "XLA CPU (PJRT 0.81, xla_cpu_pjrt.so)".
_ENGINE_MINOR = re.compile(r"XLA CPU \(PJRT 0\.(\d+)")
FIRST_RIGHT_MINOR = 100  # lammps-jax-pjrt-cpu 0.11.2 speaks 0.115, xla-cpu-pjrt 0.0.1 speaks 0.81
_CONSTRUCT = re.compile(r"\b(unreduced|reduced)=\{([^}]*)\}")
_installed = False


class UnsupportedOnEngineError(ValueError):
    """A program uses a construct the simulator engine in use would compute wrongly."""


def engine_computes_unreduced(platform_version: str) -> bool:
    """Whether the engine named in the plugin's platform version gives unreduced axes their meaning."""
    found = _ENGINE_MINOR.search(platform_version or "")
    return found is None or int(found.group(1)) >= FIRST_RIGHT_MINOR


def check_module_text(text: str, platform_version: str, module_name: str = "") -> None:
    """Raises UnsupportedOnEngineError naming the construct when the engine cannot compute it."""
    if engine_computes_unreduced(platform_version):
        return
    found = _CONSTRUCT.search(text)
    if found is None:
        return
    kind, axes = found.group(1), found.group(2)
    raise UnsupportedOnEngineError(
        f"pjrt-neuron: '{module_name}' uses {kind} axes ({kind}={{{axes}}}, e.g. P({kind}={{...}}) or "
        f"psum into {kind}); the simulator engine here ({platform_version}) computes them as replicated, "
        "which gives wrong numbers. Run it on the newer engine build: "
        "PJRT_NEURON_SIM_ENGINE=lammps-jax-pjrt-cpu (pip install 'pjrt-neuron[engine-jax]')")


def install() -> bool:
    """Wraps jax._src.compiler.backend_compile_and_load once; False where JAX lacks it."""
    global _installed
    if _installed:
        return True
    try:
        from jax._src import compiler
    except ImportError:
        return False
    original = getattr(compiler, "backend_compile_and_load", None)
    if original is None:
        return False

    def backend_compile_and_load(backend, module, *args, **kwargs):
        if getattr(backend, "platform", None) == "neuron":
            version = getattr(backend, "platform_version", "")
            if not engine_computes_unreduced(version):
                name = str(module.operation.attributes["sym_name"]).strip('"')
                check_module_text(str(module), version, name)
        return original(backend, module, *args, **kwargs)

    backend_compile_and_load.__wrapped__ = original
    compiler.backend_compile_and_load = backend_compile_and_load
    _installed = True
    return True


def installed() -> bool:
    return _installed
