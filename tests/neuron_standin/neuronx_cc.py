#!/usr/bin/env python3
"""The neuronx-cc stand-in: checks a program as strictly as the contract says and writes a NEFF.

Tests only (see README.md). It runs no Neuron code: the "NEFF" it writes is the stand-in's
private container holding the program itself, which the libnrt stand-in runs on XLA's CPU engine.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hlo_reader  # noqa: E402
import neff  # noqa: E402

VERSION = "2.21.0.0+standin"

INPUT_NAMES_ATTRIBUTE = "neff_input_names"
OUTPUT_NAMES_ATTRIBUTE = "neff_output_names"
MUST_ALIAS_SUFFIX = ".must_alias_input"
MAX_NAME_BYTES = 255  # nrt_tensor_info_t holds a name in char[256]

# Error codes. The first three come from the contract; the ESTD ones are the stand-in's own,
# for failures whose real code is not public.
UNSUPPORTED = "NCC_EUOC002"
COMPLEX = "NCC_EVRF004"
UNREADABLE_INPUT = "NCC_ESTD001"
BAD_TENSOR_NAMES = "NCC_ESTD002"
PASSTHROUGH_OUTPUT = "NCC_ESTD003"

COMPILE_ERROR_EXIT = 1

# XLA PrimitiveType numbers -> (byte size, nrt dtype of the sparse enum). What may cross the
# NEFF boundary; PRED is reported as UINT8, as the runtime does not always keep the type.
_IO_TYPES = {
    1: (1, 3),     # PRED -> UINT8
    2: (1, 2),     # S8 -> INT8
    3: (2, 4),     # S16 -> INT16
    4: (4, 8),     # S32 -> INT32
    5: (8, 12),    # S64 -> INT64
    6: (1, 3),     # U8 -> UINT8
    7: (2, 5),     # U16 -> UINT16
    8: (4, 9),     # U32 -> UINT32
    9: (8, 1),     # U64 -> UINT64
    10: (2, 7),    # F16 -> FLOAT16
    11: (4, 10),   # F32 -> FLOAT32
    16: (2, 6),    # BF16 -> BFLOAT16
    19: (1, 15),   # F8E5M2 -> FP8_E5
    20: (1, 14),   # F8E4M3FN -> FP8_E4
}
_TYPE_NAMES = {
    1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32", 9: "u64",
    10: "f16", 11: "f32", 12: "f64", 13: "tuple", 14: "opaque", 15: "c64", 16: "bf16",
    17: "token", 18: "c128", 19: "f8e5m2", 20: "f8e4m3fn", 21: "s4", 22: "u4",
    23: "f8e4m3b11fnuz", 24: "f8e5m2fnuz", 25: "f8e4m3fnuz", 26: "s2", 27: "u2",
    28: "f8e4m3", 29: "f8e3m4", 30: "f4e2m1fn", 31: "f8e8m0fnu",
}
_COMPLEX_TYPES = {15, 18}
_INTEGER_TYPES = {2, 3, 4, 5, 6, 7, 8, 9, 21, 22, 26, 27}
# Element types allowed inside a program beyond the I/O ones: tuples, tokens of side effects.
_INTERNAL_ONLY_TYPES = {13, 17}
_HOST_TRANSFER_OPCODES = {"infeed", "outfeed", "send", "send-done", "recv", "recv-done"}

VERBOSITY = ["debug", "info", "warning", "error", "critical"]


class CompileError(Exception):
    def __init__(self, problems: list[tuple[str, str]]):
        super().__init__("; ".join(f"[{code}] {text}" for code, text in problems))
        self.problems = problems


class Log:
    """Lines on stdout, and in --logfile when given, in the real compiler's shape."""

    def __init__(self, logfile: str | None, verbosity: str):
        self.file = open(logfile, "a", encoding="utf-8") if logfile else None
        self.threshold = VERBOSITY.index(verbosity)

    def line(self, text: str) -> None:
        print(text, flush=True)
        if self.file:
            self.file.write(text + "\n")
            self.file.flush()

    def _event(self, level: str, text: str) -> None:
        if VERBOSITY.index(level.lower()) < self.threshold:
            return
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.line(f"{stamp} {level} {os.getpid()} [neuronx-cc]: {text}")

    def info(self, text: str) -> None:
        self._event("INFO", text)

    def error(self, code: str, text: str) -> None:
        self._event("ERROR", f"[{code}] {text}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neuronx-cc", allow_abbrev=False)
    parser.add_argument("--version", action="version",
                        version=f"NeuronX Compiler version {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="compile")
    compile_ = commands.add_parser("compile", allow_abbrev=False)
    compile_.add_argument("input", help="serialized HloModuleProto")
    compile_.add_argument("--framework", required=True, choices=["XLA"])
    compile_.add_argument("--target", required=True, choices=sorted(neff.TARGET_FAMILIES))
    compile_.add_argument("--output", required=True)
    compile_.add_argument("--model-type", choices=["generic", "transformer"], default="generic")
    compile_.add_argument("--auto-cast", choices=["none", "matmult", "all"], default="none")
    compile_.add_argument("--auto-cast-type", choices=["bf16", "fp16", "tf32", "fp8_e4m3"])
    compile_.add_argument("-O", dest="optimization", choices=["1", "2", "3"], default="2")
    compile_.add_argument("--lnc", type=int, choices=[1, 2])
    compile_.add_argument("--logfile")
    compile_.add_argument("--verbose", choices=VERBOSITY, default="warning")
    return parser


def _parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.lnc is None:
        args.lnc = 2 if args.target == "trn2" else 1
    elif args.lnc == 2 and args.target != "trn2":
        parser.exit(2, f"neuronx-cc compile: error: --lnc 2 needs --target trn2, "
                       f"not {args.target}\n")
    return args


def _inject_faults(log: Log) -> None:
    """Test hooks: a slow compile, a compiler killed by a signal, a chosen failure."""
    delay = float(os.environ.get("NEURON_STANDIN_CC_DELAY", "0") or 0)
    start = time.monotonic()
    while time.monotonic() - start < delay:
        log.line(f"Compiling... {time.monotonic() - start:.0f}s elapsed")
        time.sleep(min(1.0, max(0.0, delay - (time.monotonic() - start))))
    kill_with = os.environ.get("NEURON_STANDIN_CC_SIGNAL", "")
    if kill_with:
        number = int(kill_with) if kill_with.lstrip("-").isdigit() else \
            int(getattr(signal, kill_with.upper() if kill_with.upper().startswith("SIG")
                        else "SIG" + kill_with.upper()))
        os.kill(os.getpid(), abs(number))
        time.sleep(5)  # a caught signal should not let the compile go on
    failure = os.environ.get("NEURON_STANDIN_CC_FAIL", "")
    if failure:
        code, _, text = failure.partition(":")
        raise CompileError([(code, text or "failure injected by NEURON_STANDIN_CC_FAIL")])


def _type_name(element_type: int) -> str:
    return _TYPE_NAMES.get(element_type, f"type {element_type}")


def _check_types(module: hlo_reader.Module) -> list[tuple[str, str]]:
    problems = []
    for instruction in module.instructions():
        where = f"instruction {instruction.name} ({instruction.opcode})"
        for leaf in instruction.shape.leaves():
            t = leaf.element_type
            if t in _COMPLEX_TYPES:
                problems.append((COMPLEX, f"{where}: complex type {_type_name(t)} is not supported"))
            elif t not in _IO_TYPES and t not in _INTERNAL_ONLY_TYPES:
                problems.append((UNSUPPORTED, f"{where}: element type {_type_name(t)} "
                                              "is not supported"))
            if leaf.is_dynamic:
                problems.append((UNSUPPORTED, f"{where}: dynamic shapes are not supported"))
        if instruction.opcode == "conditional":
            problems.append((UNSUPPORTED, f"{where}: conditionals are not supported"))
        elif instruction.opcode == "custom-call" and "callback" in instruction.custom_call_target:
            problems.append((UNSUPPORTED, f"{where}: host callback "
                                          f"{instruction.custom_call_target} is not supported"))
        elif instruction.opcode in _HOST_TRANSFER_OPCODES:
            problems.append((UNSUPPORTED, f"{where}: host transfers are not supported"))
        elif instruction.opcode == "dot" and instruction.shape.element_type in _INTEGER_TYPES:
            problems.append((UNSUPPORTED, f"{where}: integer dot is not supported"))
    return problems


def _check_name(name: str, what: str) -> str | None:
    if not name:
        return f"{what} has an empty name"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"{what} name {name!r} is longer than {MAX_NAME_BYTES} bytes"
    if not name.isprintable():
        return f"{what} name {name!r} has unprintable characters"
    return None


def _io_tensor(name: str, usage: int, position: int, shape: hlo_reader.Shape,
               what: str) -> tuple[neff.Tensor | None, str | None]:
    if shape.element_type not in _IO_TYPES:
        return None, f"{what} has element type {_type_name(shape.element_type)}"
    element_size, nrt_dtype = _IO_TYPES[shape.element_type]
    if any(d < 0 or d >= 1 << 32 for d in shape.dimensions):
        return None, f"{what} has a dimension outside 0..2^32-1"
    return neff.Tensor(name, usage, position, nrt_dtype, shape.element_type,
                       list(shape.dimensions), element_size * shape.element_count()), None


def _tensor_table(module: hlo_reader.Module) -> list[neff.Tensor]:
    """The NEFF's inputs and outputs, named by the program's frontend attributes."""
    entry = module.entry()
    problems: list[tuple[str, str]] = []
    parameters = sorted((i for i in entry.instructions if i.opcode == "parameter"),
                        key=lambda i: i.parameter_number)
    if [p.parameter_number for p in parameters] != list(range(len(parameters))):
        raise CompileError([(UNREADABLE_INPUT, "entry parameters are not numbered 0..N-1")])

    aliased_output = {}
    for alias in module.aliases:
        if alias.parameter_index or len(alias.output_index) > 1:
            problems.append((UNSUPPORTED, "input/output alias into a tuple element"))
            continue
        aliased_output[alias.parameter_number] = alias.output_index[0] if alias.output_index else 0

    tensors: list[neff.Tensor] = []
    for p in parameters:
        what = f"parameter {p.parameter_number} ({p.name})"
        name = p.frontend_attributes.get(INPUT_NAMES_ATTRIBUTE)
        if name is None:
            problems.append((BAD_TENSOR_NAMES, f"{what} has no {INPUT_NAMES_ATTRIBUTE} attribute"))
            continue
        if p.parameter_number in aliased_output and not name.endswith(MUST_ALIAS_SUFFIX):
            name += MUST_ALIAS_SUFFIX
        problem = _check_name(name, what)
        if problem:
            problems.append((BAD_TENSOR_NAMES, problem))
            continue
        if p.shape.is_tuple:
            problems.append((UNSUPPORTED, f"{what} is a tuple; pass its elements separately"))
            continue
        tensor, problem = _io_tensor(name, neff.USAGE_INPUT, p.parameter_number, p.shape, what)
        if problem:
            problems.append((UNSUPPORTED, problem))
            continue
        tensor.alias_output = aliased_output.get(p.parameter_number, neff.NO_ALIAS)
        tensors.append(tensor)

    root = entry.root()
    result_shapes = root.shape.tuple_shapes if root.shape.is_tuple else [root.shape]
    if root.opcode == "tuple":
        producers = [entry.by_id(i) for i in root.operand_ids]
    else:
        producers = [root] if not root.shape.is_tuple else [None] * len(result_shapes)
    names_text = root.frontend_attributes.get(OUTPUT_NAMES_ATTRIBUTE)
    if names_text is None:
        problems.append((BAD_TENSOR_NAMES,
                         f"the root {root.name} has no {OUTPUT_NAMES_ATTRIBUTE} attribute"))
        names: list[str] = []
    else:
        names = names_text.split(",")
        if len(names) != len(result_shapes):
            problems.append((BAD_TENSOR_NAMES, f"{OUTPUT_NAMES_ATTRIBUTE} names {len(names)} "
                                               f"outputs, the result has {len(result_shapes)}"))
            names = []
    for index, (name, shape, producer) in enumerate(zip(names, result_shapes, producers)):
        what = f"output {index}"
        problem = _check_name(name, what)
        if problem:
            problems.append((BAD_TENSOR_NAMES, problem))
            continue
        if shape.is_tuple:
            problems.append((UNSUPPORTED, f"{what} is a nested tuple"))
            continue
        if producer is not None and producer.opcode == "parameter" and \
                aliased_output.get(producer.parameter_number) != index:
            problems.append((PASSTHROUGH_OUTPUT,
                             f"{what} is parameter {producer.parameter_number} passed straight "
                             "through; inputs and outputs live apart, copy it in the program"))
            continue
        tensor, problem = _io_tensor(name, neff.USAGE_OUTPUT, index, shape, what)
        if problem:
            problems.append((UNSUPPORTED, problem))
            continue
        tensors.append(tensor)

    seen: set[str] = set()
    for tensor in tensors:
        if tensor.name in seen:
            problems.append((BAD_TENSOR_NAMES, f"tensor name {tensor.name!r} is used twice"))
        seen.add(tensor.name)
    if problems:
        raise CompileError(problems)
    return tensors


def _validate_with_xla(program: bytes) -> None:
    """XLA's own parser must accept the module, as the real compiler's front end would."""
    try:
        import jaxlib._hlo as xla_hlo
    except ImportError as e:
        raise CompileError([(UNREADABLE_INPUT, f"the stand-in needs jaxlib to read HLO: {e}")])
    try:
        xla_hlo.XlaComputation(program).get_hlo_module()
    except Exception as e:  # noqa: BLE001 - jaxlib raises plain RuntimeError/ValueError
        raise CompileError([(UNREADABLE_INPUT, f"not a valid HloModuleProto: {e}")])


def compile_program(args: argparse.Namespace, log: Log) -> None:
    try:
        program = Path(args.input).read_bytes()
    except OSError as e:
        raise CompileError([(UNREADABLE_INPUT, f"cannot read {args.input}: {e.strerror}")])
    try:
        module = hlo_reader.read_module(program)
    except hlo_reader.MalformedProto as e:
        raise CompileError([(UNREADABLE_INPUT, f"{args.input} is not an HloModuleProto: {e}")])
    _validate_with_xla(program)
    problems = _check_types(module)
    try:
        tensors = _tensor_table(module)
    except CompileError as naming:
        problems += naming.problems
    if problems:
        raise CompileError(problems)
    log.info(f"module {module.name}: {sum(t.usage == neff.USAGE_INPUT for t in tensors)} inputs, "
             f"{sum(t.usage == neff.USAGE_OUTPUT for t in tensors)} outputs, target "
             f"{args.target}, lnc {args.lnc}, -O{args.optimization}")
    container = neff.encode(neff.Neff(neff.TARGET_FAMILIES[args.target], args.lnc, program,
                                      tensors))
    output = Path(args.output)
    partial = output.with_name(f".{output.name}.{os.getpid()}.partial")
    partial.write_bytes(container)
    os.replace(partial, output)  # a killed compile leaves no half-written NEFF


def main(argv: list[str]) -> int:
    args = _parse_arguments(argv)
    log = Log(args.logfile, args.verbose)
    try:
        _inject_faults(log)
        compile_program(args, log)
    except CompileError as failure:
        for code, text in failure.problems:
            log.error(code, text)
        log.line("Compiler status ERROR")
        return COMPILE_ERROR_EXIT
    log.line("Compiler status PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
