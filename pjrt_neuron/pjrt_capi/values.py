"""Python values to and from the C API's: numpy dtypes and buffer types, strings, pointer
arrays, pointer fields, and PJRT_NamedValue lists."""

from __future__ import annotations

import ctypes
import numbers

import numpy as np

from pjrt_neuron.pjrt_capi.handles import _Handle
from pjrt_neuron.pjrt_capi.header import STRUCT_SIZES, STRUCTS, BufferType, NamedValueType

try:  # bf16 / fp8 / int4 dtypes; optional
    import ml_dtypes
except ImportError:  # pragma: no cover - depends on the environment
    ml_dtypes = None

_DTYPE_TO_PJRT = {
    np.dtype(np.bool_): BufferType.PRED,
    np.dtype(np.int8): BufferType.S8,
    np.dtype(np.int16): BufferType.S16,
    np.dtype(np.int32): BufferType.S32,
    np.dtype(np.int64): BufferType.S64,
    np.dtype(np.uint8): BufferType.U8,
    np.dtype(np.uint16): BufferType.U16,
    np.dtype(np.uint32): BufferType.U32,
    np.dtype(np.uint64): BufferType.U64,
    np.dtype(np.float16): BufferType.F16,
    np.dtype(np.float32): BufferType.F32,
    np.dtype(np.float64): BufferType.F64,
    np.dtype(np.complex64): BufferType.C64,
    np.dtype(np.complex128): BufferType.C128,
}
if ml_dtypes is not None:
    # Byte-sized extension types only: sub-byte types (int4, ...) need a packed
    # host representation that ml_dtypes arrays do not have.
    for _mlname, _pjrt in [
            ("bfloat16", "BF16"), ("float8_e5m2", "F8E5M2"),
            ("float8_e4m3fn", "F8E4M3FN"),
            ("float8_e4m3b11fnuz", "F8E4M3B11FNUZ"),
            ("float8_e5m2fnuz", "F8E5M2FNUZ"),
            ("float8_e4m3fnuz", "F8E4M3FNUZ"), ("float8_e4m3", "F8E4M3"),
            ("float8_e3m4", "F8E3M4"), ("float8_e8m0fnu", "F8E8M0FNU")]:
        if hasattr(ml_dtypes, _mlname) and _pjrt in BufferType.__members__:
            _DTYPE_TO_PJRT[np.dtype(getattr(ml_dtypes, _mlname))] = BufferType[_pjrt]
_PJRT_TO_DTYPE = {v: k for k, v in _DTYPE_TO_PJRT.items()}


def dtype_to_buffer_type(dtype) -> "BufferType":
    dt = np.dtype(dtype)
    try:
        return _DTYPE_TO_PJRT[dt]
    except KeyError:
        raise TypeError(f"no PJRT buffer type for numpy dtype {dt}") from None


def buffer_type_to_dtype(t) -> np.dtype:
    try:
        return _PJRT_TO_DTYPE[BufferType(t)]
    except (KeyError, ValueError):
        raise TypeError(f"no numpy dtype for PJRT buffer type {t!r}") from None


def _string_at(addr, size) -> str:
    if not addr or not size:
        return ""
    return ctypes.string_at(addr, size).decode("utf-8", errors="replace")


def _ptr_array(addr, n) -> list[int]:
    if not addr or not n:
        return []
    return list((ctypes.c_void_p * n).from_address(addr))


def _to_pointer(value, keep: list):
    """Convert a Python value for a c_void_p field; keep backing objects."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, _Handle):
        return value.ptr
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, (bytes, bytearray)):
        buf = ctypes.create_string_buffer(bytes(value), len(value))
        keep.append(buf)
        return ctypes.addressof(buf)
    if isinstance(value, np.ndarray):
        keep.append(value)
        return value.ctypes.data
    if isinstance(value, ctypes._CFuncPtr):
        keep.append(value)
        return ctypes.cast(value, ctypes.c_void_p).value
    if isinstance(value, (ctypes._Pointer, ctypes.c_void_p, ctypes.c_char_p)):
        keep.append(value)
        return ctypes.cast(value, ctypes.c_void_p).value
    if isinstance(value, (ctypes.Structure, ctypes.Union, ctypes.Array,
                          ctypes._SimpleCData)):
        keep.append(value)
        return ctypes.addressof(value)
    raise TypeError(f"cannot pass {type(value).__name__} as a pointer")


def _named_values_in(options: dict | None):
    """dict -> (PJRT_NamedValue array or None, count, keep-alive list)."""
    NV = STRUCTS["PJRT_NamedValue"]
    if not options:
        return None, 0, []
    keep = []
    arr = (NV * len(options))()
    for nv, (key, value) in zip(arr, options.items()):
        name = key.encode()
        keep.append(name)
        nv.struct_size = STRUCT_SIZES["PJRT_NamedValue"]
        nv.name = ctypes.cast(ctypes.c_char_p(name), ctypes.c_void_p).value
        nv.name_size = len(name)
        if isinstance(value, bool) or isinstance(value, np.bool_):
            nv.type, nv.bool_value, nv.value_size = NamedValueType.kBool, bool(value), 1
        elif isinstance(value, numbers.Integral):
            nv.type, nv.int64_value, nv.value_size = NamedValueType.kInt64, int(value), 1
        elif isinstance(value, numbers.Real):
            nv.type, nv.float_value, nv.value_size = NamedValueType.kFloat, float(value), 1
        elif isinstance(value, (str, bytes)):
            raw = value.encode() if isinstance(value, str) else value
            keep.append(raw)
            nv.type = NamedValueType.kString
            nv.string_value = ctypes.cast(ctypes.c_char_p(raw), ctypes.c_void_p).value
            nv.value_size = len(raw)
        elif isinstance(value, (list, tuple, np.ndarray)):
            ints = (ctypes.c_int64 * len(value))(*[int(v) for v in value])
            keep.append(ints)
            nv.type = NamedValueType.kInt64List
            nv.int64_array_value = ctypes.addressof(ints)
            nv.value_size = len(value)
        else:
            raise TypeError(f"unsupported named value {key}={value!r}")
    keep.append(arr)
    return arr, len(options), keep


def _named_values_out(addr, n) -> dict:
    if not addr or not n:
        return {}
    arr = (STRUCTS["PJRT_NamedValue"] * n).from_address(addr)
    out = {}
    for nv in arr:
        key = _string_at(nv.name, nv.name_size)
        t = nv.type
        if t == NamedValueType.kString:
            out[key] = _string_at(nv.string_value, nv.value_size)
        elif t == NamedValueType.kInt64:
            out[key] = nv.int64_value
        elif t == NamedValueType.kInt64List:
            out[key] = (list((ctypes.c_int64 * nv.value_size).from_address(
                nv.int64_array_value)) if nv.value_size else [])
        elif t == NamedValueType.kFloat:
            out[key] = nv.float_value
        elif t == NamedValueType.kBool:
            out[key] = nv.bool_value
        else:
            out[key] = ("unknown-type", t)
    return out
