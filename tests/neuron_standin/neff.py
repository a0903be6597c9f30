"""The stand-in's private NEFF container: written by the neuronx-cc stand-in, read by tests.

The layout is described once, in README.md ("The NEFF container"); the libnrt stand-in reads
it in src/neff.cc. It is not AWS's NEFF format and nothing outside tests/ may depend on it.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

MAGIC = b"NEFFSTDN"
FORMAT_VERSION = 1

# The instance families of nrt_get_instance_info, which also name a NEFF's target.
TARGET_FAMILIES = {"trn1": 2, "trn1n": 3, "inf2": 4, "trn2": 5}

USAGE_INPUT, USAGE_OUTPUT = 0, 1
NO_ALIAS = -1

_HEADER = struct.Struct("<8sIIIIQQ")  # magic, version, target, lnc, count, program, table
_RECORD = struct.Struct("<IIiIIIQ")  # usage, position, alias, nrt dtype, xla type, ndim, bytes
_CHECKSUM = struct.Struct("<I")  # CRC-32 (zlib's) of every byte before it


class NeffError(ValueError):
    """The bytes are not a NEFF of this stand-in."""


@dataclass
class Tensor:
    name: str
    usage: int
    position: int  # parameter number for an input, index in the result tuple for an output
    nrt_dtype: int
    xla_element_type: int
    shape: list[int]
    byte_size: int
    alias_output: int = NO_ALIAS  # for a must-alias input: the position of its output


@dataclass
class Neff:
    target_family: int
    lnc: int
    program: bytes
    tensors: list[Tensor] = field(default_factory=list)


def encode(neff: Neff) -> bytes:
    table = bytearray()
    for t in neff.tensors:
        name = t.name.encode("utf-8")
        table += _RECORD.pack(t.usage, t.position, t.alias_output, t.nrt_dtype,
                              t.xla_element_type, len(t.shape), t.byte_size)
        table += struct.pack(f"<{len(t.shape)}I", *t.shape)
        table += struct.pack("<I", len(name)) + name
    body = _HEADER.pack(MAGIC, FORMAT_VERSION, neff.target_family, neff.lnc,
                        len(neff.tensors), len(neff.program), len(table))
    body += bytes(table) + neff.program
    return body + _CHECKSUM.pack(zlib.crc32(body))


def decode(data: bytes) -> Neff:
    if len(data) < _HEADER.size + _CHECKSUM.size:
        raise NeffError("too short for a NEFF header")
    magic, version, target, lnc, count, program_size, table_size = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise NeffError("not a stand-in NEFF (bad magic)")
    if version != FORMAT_VERSION:
        raise NeffError(f"NEFF format version {version} is not {FORMAT_VERSION}")
    expected = _HEADER.size + table_size + program_size + _CHECKSUM.size
    if len(data) != expected:
        raise NeffError(f"NEFF is {len(data)} bytes, its header says {expected}")
    (checksum,) = _CHECKSUM.unpack_from(data, len(data) - _CHECKSUM.size)
    if checksum != zlib.crc32(data[:-_CHECKSUM.size]):
        raise NeffError("NEFF checksum mismatch")
    neff = Neff(target, lnc, data[_HEADER.size + table_size:len(data) - _CHECKSUM.size])
    pos, end = _HEADER.size, _HEADER.size + table_size
    for _ in range(count):
        usage, position, alias, dtype, xla_type, ndim, byte_size = _RECORD.unpack_from(data, pos)
        pos += _RECORD.size
        shape = list(struct.unpack_from(f"<{ndim}I", data, pos))
        pos += 4 * ndim
        (name_length,) = struct.unpack_from("<I", data, pos)
        pos += 4
        name = data[pos:pos + name_length].decode("utf-8")
        pos += name_length
        if pos > end:
            raise NeffError("tensor table runs past its size")
        neff.tensors.append(Tensor(name, usage, position, dtype, xla_type, shape, byte_size, alias))
    if pos != end:
        raise NeffError("tensor table has trailing bytes")
    return neff
