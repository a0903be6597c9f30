"""Refuses, at compile time, JAX programs that the older simulator engine would compute wrongly.

xla-cpu-pjrt 0.0.1 (XLA of November 2025) computes partial sums that a program makes itself
(a dot or reduction contracted over a sharded axis, left unreduced; `psum` into unreduced) and
resolves them as the CPU backend does, but it does not give a *replicated* value unreduced axes:
the CPU backend keeps the value on one core and zeros on the others, the older build keeps it on
every core, so a later sum counts it once per core (issue 30: [6, 6] where the CPU backend gives
[6, 0]). That happens in a reshard of a replicated array to unreduced and in the cotangent of a
`reduced` input. Such programs are refused, naming the construct; the others run. Its StableHLO
arrives as bytecode the plugin cannot read, so the check runs here, on the module JAX is about to
compile. It wraps a private JAX function (checked on JAX 0.7.2 to 0.10.2); where that function is
missing the guard is off and says so in `installed()`.
"""

from __future__ import annotations

import re

# The engine description in the platform version: "XLA CPU (PJRT 0.81, xla_cpu_pjrt.so)".
_ENGINE_MINOR = re.compile(r"XLA CPU \(PJRT 0\.(\d+)")
FIRST_RIGHT_MINOR = 100  # lammps-jax-pjrt-cpu 0.11.2 speaks 0.115, xla-cpu-pjrt 0.0.1 speaks 0.81
_UNREDUCED = re.compile(r"\bunreduced=\{([^}]*)\}")
_REDUCED = re.compile(r"(?<!un)\breduced=\{([^}]*)\}")
_FUNC = re.compile(r"^\s*func\.func\b", re.M)
_ARG = re.compile(r"(%arg\d+): [^{,)]*(\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\})?")
_DEF = re.compile(r"^\s*(%[\w.#:]+)\s*=\s*([\w.]+)\s*(.*)$")
_CONSTRAINT_OPS = ("sdy.sharding_constraint", "sdy.reshard")
_installed = False


class UnsupportedOnEngineError(ValueError):
    """A program uses a construct the simulator engine in use would compute wrongly."""


def engine_computes_unreduced(platform_version: str) -> bool:
    """Whether the engine named in the plugin's platform version gives unreduced axes their meaning."""
    found = _ENGINE_MINOR.search(platform_version or "")
    return found is None or int(found.group(1)) >= FIRST_RIGHT_MINOR


def _axes(text: str) -> set[str]:
    found = _UNREDUCED.search(text or "")
    return {a.strip().strip('"') for a in found.group(1).split(",") if a.strip()} if found else set()


def replicated_made_unreduced(text: str) -> str | None:
    """The first place where `text` gives a replicated value unreduced axes, described; else None.

    A value is replicated along an axis when it is an argument, a constant or a constraint without
    that unreduced axis; a constraint (or a result) that adds the axis to it is the construct.
    Values other ops compute (dot_general, reduce, manual computations) may be partial sums
    already, which the older build computes right.
    """
    for body in _FUNC.split(text)[1:]:
        header, _, rest = body.partition("\n")
        args = {name: _axes(attrs) for name, attrs in _ARG.findall(header)}
        defs: dict[str, tuple[str, set[str]]] = {}  # value -> (op, unreduced axes it carries)
        for line in rest.splitlines():
            found = _DEF.match(line)
            if found is None:
                if line.strip().startswith(("return ", "func.return ")):
                    results = header.split("->", 1)[1] if "->" in header else ""
                    wanted = [_axes(r) for r in re.split(r"\btensor<", results)[1:]]
                    returned = re.findall(r"%[\w.#]+", line.split(":")[0])
                    for value, axes in zip(returned, wanted):
                        held = _held(value, args, defs, axes)
                        if not axes <= held:
                            return f"a replicated value returned with unreduced axes {sorted(axes - held)}"
                continue
            name, op, tail = found.group(1).split(":")[0], found.group(2), found.group(3)
            if op in _CONSTRAINT_OPS:
                source = re.match(r"(%[\w.#]+)", tail)
                axes = _axes(tail)
                if source is not None and axes:
                    held = _held(source.group(1), args, defs, axes)
                    if not axes <= held:
                        return (f"a replicated value given unreduced axes {sorted(axes - held)} (a reshard to "
                                f"P(unreduced={{...}}) or the cotangent of a P(reduced={{...}}) input: "
                                f"`{line.strip()[:160]}`)")
                defs[name] = (op, axes)
            elif op == "stablehlo.constant":
                defs[name] = (op, set())
                if _axes(tail):
                    return f"a constant with unreduced axes (`{line.strip()[:160]}`)"
            else:
                defs[name] = (op, _axes(tail))
    return None


def _held(value: str, args: dict, defs: dict, wanted: set[str]) -> set[str]:
    """The unreduced axes `value` is known to carry; `wanted` for a value another op computed (it
    may be a partial sum already)."""
    if value in args:
        return args[value]
    if value in defs and defs[value][0] in _CONSTRAINT_OPS + ("stablehlo.constant",):
        return defs[value][1]
    return wanted


def check_module_text(text: str, platform_version: str, module_name: str = "") -> None:
    """Raises UnsupportedOnEngineError naming the construct when the engine cannot compute it."""
    if engine_computes_unreduced(platform_version):
        return
    found = _REDUCED.search(text)
    if found is not None:
        construct = f"reduced axes (reduced={{{found.group(1)}}}, P(reduced={{...}}))"
    else:
        construct = replicated_made_unreduced(text)
        if construct is None:
            return
    raise UnsupportedOnEngineError(
        f"pjrt-neuron: '{module_name}' has {construct}; the simulator engine here ({platform_version}) "
        "keeps such a value on every core instead of one, which gives wrong sums. Run it on the newer "
        "engine build: PJRT_NEURON_SIM_ENGINE=lammps-jax-pjrt-cpu (pip install 'pjrt-neuron[engine-jax]')")


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
