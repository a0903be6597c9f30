"""A serialized xla.CompileOptionsProto with the few fields callers set, hand-encoded."""

from __future__ import annotations

import numbers

import numpy as np

# Field numbers from xla/pjrt/proto/compile_options.proto:
#   CompileOptionsProto: executable_build_options = 3 (message),
#     compile_portable_executable = 4 (bool),
#     env_option_overrides = 7 (map<string, OptionOverrideProto>;
#     map entry key = 1, value = 2)
#   ExecutableBuildOptionsProto: device_ordinal = 1, num_replicas = 4,
#     num_partitions = 5 (int64), use_spmd_partitioning = 6 (bool)
#   OptionOverrideProto: string_field = 1, bool_field = 2, int_field = 3,
#     double_field = 4

def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 -> two's complement, 10 bytes
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _pb_varint(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(int(value))


def _pb_bytes(field: int, payload: bytes) -> bytes:
    return _varint((field << 3) | 2) + _varint(len(payload)) + payload


def _pb_double(field: int, value: float) -> bytes:
    return _varint((field << 3) | 1) + np.float64(value).tobytes()


def compile_options_proto(num_replicas: int = 1, num_partitions: int = 1,
                          device_ordinal: int | None = None,
                          use_spmd_partitioning: bool = False,
                          compile_portable_executable: bool = False,
                          env_option_overrides: dict | None = None) -> bytes:
    """Serialized xla.CompileOptionsProto with the few fields tests need."""
    build = b""
    if device_ordinal is not None:
        build += _pb_varint(1, device_ordinal)
    build += _pb_varint(4, num_replicas) + _pb_varint(5, num_partitions)
    if use_spmd_partitioning:
        build += _pb_varint(6, 1)
    out = _pb_bytes(3, build)
    if compile_portable_executable:
        out += _pb_varint(4, 1)
    for key, value in (env_option_overrides or {}).items():
        if isinstance(value, bool):
            val = _pb_varint(2, value)
        elif isinstance(value, numbers.Integral):
            val = _pb_varint(3, value)
        elif isinstance(value, numbers.Real):
            val = _pb_double(4, value)
        else:
            val = _pb_bytes(1, str(value).encode())
        out += _pb_bytes(7, _pb_bytes(1, key.encode()) + _pb_bytes(2, val))
    return out
