"""Converts a StableHLO program (what JAX sends as format "mlir") to a serialized HloModuleProto,
which is what neuronx-cc reads. The Neuron engine runs this in a subprocess, so that a torch-xla
process never needs JAX.

Usage: python -m pjrt_neuron._neuron_mlir_to_hlo <program.mlir.bc> <out.hlo_module.pb>

It uses jaxlib's private MLIR bindings (checked on jaxlib 0.10.2). Exit codes: 0 converted;
3 this jaxlib lacks the bindings; 4 the program could not be converted (not 1 or 2, which
Python itself uses). Messages go to stderr.
The result is the program as JAX wrote it: not SPMD-partitioned.
"""

from __future__ import annotations

import sys

EXIT_BAD_PROGRAM = 4
EXIT_NO_BINDINGS = 3


def _bindings():
    try:
        from jax._src.interpreters import mlir as jax_mlir
        from jax._src.lib import _jax
    except ImportError as error:
        raise LookupError(f"jax/jaxlib cannot be imported here ({error})") from error
    mlir = getattr(_jax, "mlir", None)
    needed = ("deserialize_portable_artifact", "mlir_module_to_xla_computation")
    missing = [name for name in needed if mlir is None or not hasattr(mlir, name)]
    if missing or not hasattr(jax_mlir, "make_ir_context"):
        import jaxlib
        raise LookupError(f"jaxlib {getattr(jaxlib, '__version__', '?')} lacks "
                          f"{', '.join(missing) or 'make_ir_context'} (private API used to convert StableHLO)")
    return jax_mlir, mlir


def convert(program: bytes) -> bytes:
    jax_mlir, mlir = _bindings()
    with jax_mlir.make_ir_context():
        try:
            # A portable artifact (versioned StableHLO), as JAX serialises for plugins.
            text = str(mlir.deserialize_portable_artifact(program))
        except Exception:  # noqa: BLE001 - not an artifact: plain MLIR bytecode or text
            text = program
        computation = mlir.mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False)
    return computation.as_serialized_hlo_module_proto()


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], "rb") as source:
        program = source.read()
    try:
        module = convert(program)
    except LookupError as error:
        print(f"cannot convert StableHLO: {error}", file=sys.stderr)
        return EXIT_NO_BINDINGS
    except Exception as error:  # noqa: BLE001 - the message is the report
        print(f"the StableHLO program could not be converted to HLO: {error}", file=sys.stderr)
        return EXIT_BAD_PROGRAM
    with open(argv[2], "wb") as out:
        out.write(module)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
