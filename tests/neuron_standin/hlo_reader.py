"""Reads the few fields of a serialized HloModuleProto that the compiler stand-in checks.

A wire-format reader of our own, so the stand-in shares no code with the plugin's HLO
reader: a bug in one cannot hide by being in both. Field numbers are xla's hlo.proto and
xla_data.proto (checked against jaxlib 0.10.2's own serialisation).
"""

from __future__ import annotations

from dataclasses import dataclass, field


class MalformedProto(ValueError):
    """The bytes are not a well-formed protocol buffer of the expected shape."""


# HloModuleProto
_MODULE_NAME, _MODULE_ENTRY_NAME, _MODULE_COMPUTATIONS = 1, 2, 3
_MODULE_ENTRY_ID, _MODULE_ALIAS = 6, 8
# HloComputationProto
_COMPUTATION_NAME, _COMPUTATION_INSTRUCTIONS, _COMPUTATION_ID, _COMPUTATION_ROOT_ID = 1, 2, 5, 6
# HloInstructionProto
_INSTR_NAME, _INSTR_OPCODE, _INSTR_SHAPE, _INSTR_PARAMETER_NUMBER = 1, 2, 3, 9
_INSTR_CUSTOM_CALL_TARGET, _INSTR_ID, _INSTR_OPERAND_IDS = 28, 35, 36
_INSTR_CALLED_COMPUTATION_IDS, _INSTR_FRONTEND_ATTRIBUTES = 38, 68
# ShapeProto
_SHAPE_ELEMENT_TYPE, _SHAPE_DIMENSIONS, _SHAPE_TUPLE_SHAPES, _SHAPE_IS_DYNAMIC = 2, 3, 4, 6
# HloInputOutputAliasProto and its AliasEntryProto
_ALIAS_ENTRIES = 1
_ALIAS_OUTPUT_INDEX, _ALIAS_PARAMETER_NUMBER, _ALIAS_PARAMETER_INDEX, _ALIAS_KIND = 1, 2, 3, 4
# FrontendAttributes: map<string, string> map = 1, each entry {key = 1, value = 2}
_ATTRIBUTES_MAP, _MAP_KEY, _MAP_VALUE = 1, 1, 2

_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5

TUPLE_ELEMENT_TYPE = 13


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(10):
        if pos >= len(data):
            raise MalformedProto("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
    raise MalformedProto("varint longer than 10 bytes")


def _fields(data: bytes):
    """Yields (field number, wire type, value); value is an int or a bytes slice."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise MalformedProto("field number 0")
        if wire_type == _VARINT:
            value, pos = _read_varint(data, pos)
        elif wire_type == _LENGTH_DELIMITED:
            length, pos = _read_varint(data, pos)
            if pos + length > len(data):
                raise MalformedProto(f"field {number} runs past the end of its message")
            value, pos = data[pos:pos + length], pos + length
        elif wire_type in (_FIXED64, _FIXED32):
            width = 8 if wire_type == _FIXED64 else 4
            if pos + width > len(data):
                raise MalformedProto("truncated fixed-width field")
            value, pos = int.from_bytes(data[pos:pos + width], "little"), pos + width
        else:
            raise MalformedProto(f"unsupported wire type {wire_type} in field {number}")
        yield number, wire_type, value


def _repeated_ints(wire_type: int, value) -> list[int]:
    """A repeated integer field arrives packed (one blob) or as single varints."""
    if wire_type == _VARINT:
        return [value]
    if wire_type != _LENGTH_DELIMITED:
        raise MalformedProto("repeated integer field with a fixed-width wire type")
    values, pos = [], 0
    while pos < len(value):
        item, pos = _read_varint(value, pos)
        values.append(item)
    return values


def _signed(value) -> int:
    if not isinstance(value, int):
        raise MalformedProto("an integer field holds a length-delimited value")
    return value - (1 << 64) if value >= 1 << 63 else value


def _message(value, what: str) -> bytes:
    if not isinstance(value, bytes):
        raise MalformedProto(f"{what} is not a message")
    return value


def _text(value, what: str) -> str:
    if not isinstance(value, bytes):
        raise MalformedProto(f"{what} is not a string")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedProto(f"{what} is not UTF-8") from e


@dataclass
class Shape:
    element_type: int = 0
    dimensions: list[int] = field(default_factory=list)
    tuple_shapes: list["Shape"] = field(default_factory=list)
    is_dynamic: bool = False

    @property
    def is_tuple(self) -> bool:
        return self.element_type == TUPLE_ELEMENT_TYPE

    def element_count(self) -> int:
        count = 1
        for d in self.dimensions:
            count *= d
        return count

    def leaves(self) -> list["Shape"]:
        if not self.is_tuple:
            return [self]
        return [leaf for element in self.tuple_shapes for leaf in element.leaves()]


@dataclass
class Instruction:
    name: str = ""
    opcode: str = ""
    shape: Shape = field(default_factory=Shape)
    parameter_number: int = 0
    id: int = 0
    operand_ids: list[int] = field(default_factory=list)
    called_computation_ids: list[int] = field(default_factory=list)
    custom_call_target: str = ""
    frontend_attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class Computation:
    name: str = ""
    id: int = 0
    root_id: int = 0
    instructions: list[Instruction] = field(default_factory=list)

    def root(self) -> Instruction:
        for instruction in self.instructions:
            if instruction.id == self.root_id:
                return instruction
        raise MalformedProto(f"computation {self.name} has no instruction with its root id")

    def by_id(self, instruction_id: int) -> Instruction:
        for instruction in self.instructions:
            if instruction.id == instruction_id:
                return instruction
        raise MalformedProto(f"computation {self.name} has no instruction {instruction_id}")


@dataclass
class Alias:
    output_index: list[int]
    parameter_number: int
    parameter_index: list[int]
    kind: int  # 0 undefined, 1 may-alias, 2 must-alias


@dataclass
class Module:
    name: str = ""
    entry_name: str = ""
    entry_id: int | None = None
    computations: list[Computation] = field(default_factory=list)
    aliases: list[Alias] = field(default_factory=list)

    def entry(self) -> Computation:
        for computation in self.computations:
            if self.entry_id is not None and computation.id == self.entry_id:
                return computation
        for computation in self.computations:
            if computation.name == self.entry_name:
                return computation
        raise MalformedProto("the module has no entry computation")

    def instructions(self):
        for computation in self.computations:
            yield from computation.instructions


def _shape(data: bytes) -> Shape:
    shape = Shape()
    for number, wire_type, value in _fields(data):
        if number == _SHAPE_ELEMENT_TYPE:
            shape.element_type = _signed(value)
        elif number == _SHAPE_DIMENSIONS:
            shape.dimensions.extend(_signed(v) for v in _repeated_ints(wire_type, value))
        elif number == _SHAPE_TUPLE_SHAPES:
            shape.tuple_shapes.append(_shape(_message(value, "tuple element shape")))
        elif number == _SHAPE_IS_DYNAMIC:
            shape.is_dynamic |= any(_repeated_ints(wire_type, value))
    return shape


def _frontend_attributes(data: bytes) -> dict[str, str]:
    attributes = {}
    for number, _, entry in _fields(data):
        if number != _ATTRIBUTES_MAP:
            continue
        key = value = ""
        for entry_number, _, item in _fields(_message(entry, "frontend attribute")):
            if entry_number == _MAP_KEY:
                key = _text(item, "frontend attribute name")
            elif entry_number == _MAP_VALUE:
                value = _text(item, "frontend attribute value")
        attributes[key] = value
    return attributes


def _instruction(data: bytes) -> Instruction:
    instruction = Instruction()
    for number, wire_type, value in _fields(data):
        if number == _INSTR_NAME:
            instruction.name = _text(value, "instruction name")
        elif number == _INSTR_OPCODE:
            instruction.opcode = _text(value, "opcode")
        elif number == _INSTR_SHAPE:
            instruction.shape = _shape(_message(value, "instruction shape"))
        elif number == _INSTR_PARAMETER_NUMBER:
            instruction.parameter_number = _signed(value)
        elif number == _INSTR_ID:
            instruction.id = _signed(value)
        elif number == _INSTR_OPERAND_IDS:
            instruction.operand_ids.extend(_signed(v) for v in _repeated_ints(wire_type, value))
        elif number == _INSTR_CALLED_COMPUTATION_IDS:
            instruction.called_computation_ids.extend(
                _signed(v) for v in _repeated_ints(wire_type, value))
        elif number == _INSTR_CUSTOM_CALL_TARGET:
            instruction.custom_call_target = _text(value, "custom-call target")
        elif number == _INSTR_FRONTEND_ATTRIBUTES:
            instruction.frontend_attributes.update(
                _frontend_attributes(_message(value, "frontend attributes")))
    return instruction


def _computation(data: bytes) -> Computation:
    computation = Computation()
    for number, _, value in _fields(data):
        if number == _COMPUTATION_NAME:
            computation.name = _text(value, "computation name")
        elif number == _COMPUTATION_INSTRUCTIONS:
            computation.instructions.append(_instruction(_message(value, "instruction")))
        elif number == _COMPUTATION_ID:
            computation.id = _signed(value)
        elif number == _COMPUTATION_ROOT_ID:
            computation.root_id = _signed(value)
    return computation


def _aliases(data: bytes) -> list[Alias]:
    aliases = []
    for number, _, entry in _fields(data):
        if number != _ALIAS_ENTRIES:
            continue
        alias = Alias([], 0, [], 0)
        for entry_number, wire_type, value in _fields(_message(entry, "alias entry")):
            if entry_number == _ALIAS_OUTPUT_INDEX:
                alias.output_index.extend(_repeated_ints(wire_type, value))
            elif entry_number == _ALIAS_PARAMETER_NUMBER:
                alias.parameter_number = _signed(value)
            elif entry_number == _ALIAS_PARAMETER_INDEX:
                alias.parameter_index.extend(_repeated_ints(wire_type, value))
            elif entry_number == _ALIAS_KIND:
                alias.kind = _signed(value)
        aliases.append(alias)
    return aliases


def read_module(data: bytes) -> Module:
    module = Module()
    for number, _, value in _fields(data):
        if number == _MODULE_NAME:
            module.name = _text(value, "module name")
        elif number == _MODULE_ENTRY_NAME:
            module.entry_name = _text(value, "entry computation name")
        elif number == _MODULE_COMPUTATIONS:
            module.computations.append(_computation(_message(value, "computation")))
        elif number == _MODULE_ENTRY_ID:
            module.entry_id = _signed(value)
        elif number == _MODULE_ALIAS:
            module.aliases.extend(_aliases(_message(value, "input/output alias")))
    if not module.computations:
        raise MalformedProto("the module has no computations")
    return module
