"""A small ctypes client for the PJRT C API: the native PyTorch device drives the plugin with it,
and the test-suite uses it to drive a
PJRT plugin ``.so`` directly (no jax / torch_xla in between).

Two layers:

* Low level: ``pjrt_c_api.h`` is parsed at import time.  Every struct becomes a
  ``ctypes.Structure`` in ``STRUCTS`` (also reachable as module attributes,
  e.g. ``pjrt_capi.PJRT_Client_Create_Args``), every named enum an ``IntEnum``
  in ``ENUMS`` (``pjrt_capi.PJRT_Buffer_Type.F32``), every enumerator value in
  ``CONSTANTS`` and every ``X_STRUCT_SIZE`` (size up to the last field, what
  ``PJRT_DEFINE_STRUCT_TRAITS`` defines) in ``STRUCT_SIZES``.  ``Api(path)``
  loads a plugin; ``api.PJRT_Foo`` is the raw function pointer (call it with
  ``ctypes.byref(args)``) and ``api.call("PJRT_Foo", **fields)`` builds, sends
  and error-checks a ``PJRT_Foo_Args``.
  All pointer-typed fields are ``c_void_p`` (they read back as ``int | None``).

* Thin Pythonic layer: ``Client``, ``Device``, ``Memory``, ``Buffer``,
  ``Event``, ``Executable``, ``LoadedExecutable`` and ``PjrtError``.

Layouts were checked against gcc for API 0.81 (see ``_GCC_SIZES_0_81`` and
``check_layouts_with_cc``).  Resources are freed by explicit ``destroy()`` /
``Client.close()``; ``__del__`` is only a leak guard.
"""

from __future__ import annotations

import ctypes
import enum
import importlib.util
import numbers
import os
import re
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path

import numpy as np

try:  # bf16 / fp8 / int4 dtypes; optional
    import ml_dtypes
except ImportError:  # pragma: no cover - depends on the environment
    ml_dtypes = None

__all__ = [
    "Api", "Client", "Device", "Memory", "Buffer", "Event", "Executable",
    "LoadedExecutable", "PjrtError", "STRUCTS", "ENUMS", "CONSTANTS",
    "STRUCT_SIZES", "API_FUNCTIONS", "header_path", "cpu_plugin_path",
    "compile_options_proto", "dtype_to_buffer_type", "buffer_type_to_dtype",
    "check_layouts_with_cc",
]

# --------------------------------------------------------------------------
# Locating the header and the stock CPU plugin
# --------------------------------------------------------------------------

_CPU_PLUGIN_PACKAGE = "xla_plugins.xla_cpu_pjrt"


def _cpu_plugin_dir() -> Path:
    spec = importlib.util.find_spec(_CPU_PLUGIN_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"{_CPU_PLUGIN_PACKAGE} is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def header_path() -> Path:
    """pjrt_c_api.h to parse; PJRT_CAPI_HEADER overrides the pip-installed one."""
    override = os.environ.get("PJRT_CAPI_HEADER")
    if override:
        return Path(override)
    return _cpu_plugin_dir() / "include" / "pjrt_c_api.h"


def cpu_plugin_path() -> Path:
    return _cpu_plugin_dir() / "xla_cpu_pjrt.so"


# --------------------------------------------------------------------------
# Header parser
# --------------------------------------------------------------------------

_SCALARS = {
    "size_t": ctypes.c_size_t,
    "ssize_t": ctypes.c_ssize_t,
    "int": ctypes.c_int,
    "unsigned": ctypes.c_uint,
    "unsigned int": ctypes.c_uint,
    "long": ctypes.c_long,
    "int8_t": ctypes.c_int8,
    "uint8_t": ctypes.c_uint8,
    "int16_t": ctypes.c_int16,
    "uint16_t": ctypes.c_uint16,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "intptr_t": ctypes.c_ssize_t,   # same width as a pointer on LP64
    "uintptr_t": ctypes.c_size_t,
    "bool": ctypes.c_bool,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "char": ctypes.c_char,
}

_QUALIFIERS = {"const", "volatile", "struct", "enum", "union"}


def _strip_c(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # Preprocessor lines, including backslash continuations.
    return re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", "", text, flags=re.M)


def _match_brace(text: str, open_pos: int) -> int:
    """Index of the '}' matching the '{' at open_pos."""
    depth = 0
    for i in range(open_pos, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced braces in header")


def _split_members(body: str) -> list[str]:
    """Split a struct/union body on ';' at brace depth 0."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == ";" and depth == 0:
            out.append(body[start:i].strip())
            start = i + 1
    tail = body[start:].strip()
    if tail:
        out.append(tail)
    return [m for m in out if m]


class _Header:
    """Raw parse result: names and member descriptions, no ctypes yet."""

    def __init__(self, text: str):
        raw = _strip_c(text)
        # X_STRUCT_SIZE definitions: (struct, last_field).
        self.traits = dict(re.findall(
            r"PJRT_DEFINE_STRUCT_TRAITS\(\s*(\w+)\s*,\s*(\w+)\s*\)", raw))
        for sname, last in re.findall(
                r"PJRT_STRUCT_SIZE\(\s*(\w+)\s*,\s*(\w+)\s*\)", raw):
            self.traits.setdefault(sname, last)
        raw = re.sub(r"PJRT_DEFINE_STRUCT_TRAITS\([^;]*?\)\s*;", "", raw,
                     flags=re.S)
        # Function-pointer typedefs (callbacks) are plain pointers to us.
        self.fnptr_types = set(re.findall(
            r"typedef[^;{}]*?\(\s*\*\s*(\w+)\s*\)\s*\(", raw))
        # API function types: typedef RET NAME(ARGS* args);
        self.functions = {}
        for ret, name, argtype in re.findall(
                r"typedef\s+([\w\s\*]+?)\s*\b(\w+)\s*\(\s*(\w+)\s*\*\s*\w*\s*\)\s*;",
                raw):
            self.functions[name] = (ret.replace(" ", ""), argtype)
        self.enums: dict[str, list[tuple[str, int]]] = {}
        self.structs: dict[str, list] = {}
        self.struct_order: list[str] = []
        self.api_fields: list[str] = []
        self._parse_blocks(raw)

    def _parse_blocks(self, raw: str) -> None:
        head = re.compile(r"\b(typedef\s+)?(struct|enum)\s*(\w+)?\s*\{")
        pos = 0
        while True:
            m = head.search(raw, pos)
            if not m:
                break
            open_pos = m.end() - 1
            close = _match_brace(raw, open_pos)
            body = raw[open_pos + 1:close]
            tail = re.match(r"\s*(\w+)?\s*;", raw[close + 1:])
            alias = tail.group(1) if tail else None
            pos = close + 1 + (tail.end() if tail else 0)
            name = m.group(3) or alias
            if m.group(2) == "enum":
                if name:  # anonymous enums only hold X_STRUCT_SIZE helpers
                    self.enums[name] = self._parse_enum(body)
                continue
            if not name:
                continue
            self.structs[name] = self._parse_members(body, name)
            self.struct_order.append(name)

    def _parse_enum(self, body: str) -> list[tuple[str, int]]:
        values, nxt, known = [], 0, {}
        for entry in body.split(","):
            entry = entry.strip()
            if not entry:
                continue
            if "=" in entry:
                key, expr = (s.strip() for s in entry.split("=", 1))
                try:
                    val = int(expr, 0)
                except ValueError:
                    val = known[expr]
            else:
                key, val = entry, nxt
            known[key] = val
            values.append((key, val))
            nxt = val + 1
        return values

    def _parse_members(self, body: str, owner: str) -> list:
        """Members as tuples: ("field", name, ctype_desc) or
        ("union", name|None, [members])."""
        members = []
        for item in _split_members(body):
            um = re.match(r"union\s*\{", item)
            if um:
                inner_close = _match_brace(item, um.end() - 1)
                inner = self._parse_members(item[um.end():inner_close], owner)
                uname = item[inner_close + 1:].strip() or None
                members.append(("union", uname, inner))
                continue
            am = re.match(r"_PJRT_API_STRUCT_FIELD\(\s*(\w+)\s*\)$", item)
            if am:
                members.append(("field", am.group(1), "ptr"))
                if owner == "PJRT_Api":
                    self.api_fields.append(am.group(1))
                continue
            fm = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", item)
            if fm:  # inline function pointer, e.g. void (*deleter)(...)
                members.append(("field", fm.group(1), "ptr"))
                continue
            dm = re.match(r"(.*?)\b(\w+)\s*(?:\[\s*(\d+)\s*\])?$", item, re.S)
            if not dm:
                raise ValueError(f"cannot parse member {item!r} of {owner}")
            ctype, name, count = dm.group(1), dm.group(2), dm.group(3)
            if "*" in ctype:
                desc = "ptr"
            else:
                words = [w for w in ctype.split() if w not in _QUALIFIERS]
                desc = " ".join(words)
            if count:
                desc = (desc, int(count))
            members.append(("field", name, desc))
        return members


def _build_ctypes(hdr: _Header):
    structs: dict[str, type] = {}
    building: set[str] = set()
    union_counter = [0]

    def resolve(desc):
        if isinstance(desc, tuple):
            return resolve(desc[0]) * desc[1]
        if desc == "ptr" or desc in hdr.fnptr_types:
            return ctypes.c_void_p
        if desc in _SCALARS:
            return _SCALARS[desc]
        if desc in hdr.enums:
            return ctypes.c_int
        if desc in hdr.structs:
            return build(desc)
        raise TypeError(f"unknown C type {desc!r} in pjrt_c_api.h")

    def fields_of(members):
        fields, anon = [], []
        for kind, name, payload in members:
            if kind == "union":
                union_counter[0] += 1
                ufields, uanon = fields_of(payload)
                utype = type(f"_Union{union_counter[0]}", (ctypes.Union,),
                             {"_anonymous_": tuple(uanon), "_fields_": ufields})
                if name is None:
                    name = f"_u{union_counter[0]}"
                    anon.append(name)
                fields.append((name, utype))
            else:
                fields.append((name, resolve(payload)))
        return fields, anon

    def build(name):
        if name in structs:
            return structs[name]
        if name in building:
            raise TypeError(f"struct {name} contains itself by value")
        building.add(name)
        fields, anon = fields_of(hdr.structs[name])
        cls = type(name, (ctypes.Structure,),
                   {"_anonymous_": tuple(anon), "_fields_": fields})
        structs[name] = cls
        return cls

    for name in hdr.struct_order:
        build(name)
    return structs


def _field_names(cls) -> set[str]:
    """Assignable field names, including members of anonymous unions."""
    names = set()
    anon = set(getattr(cls, "_anonymous_", ()))
    for fname, ftype in cls._fields_:
        if fname in anon:
            names |= _field_names(ftype)
        else:
            names.add(fname)
    return names


def _short_enum_names(name: str, values):
    keys = [k for k, _ in values]
    prefix = os.path.commonprefix(keys) if len(keys) > 1 else name + "_"
    prefix = prefix[:prefix.rfind("_") + 1] if "_" in prefix else ""
    if not all(k.startswith(prefix) and k[len(prefix):] for k in keys):
        prefix = ""
    out = {}
    for k, v in values:
        short = k[len(prefix):]
        if short[0].isdigit():
            short = "_" + short
        out[short] = v
    return out


_HEADER_PATH = header_path()
_HDR = _Header(_HEADER_PATH.read_text())

STRUCTS: dict[str, type] = _build_ctypes(_HDR)
ENUMS: dict[str, type] = {
    name: enum.IntEnum(name, _short_enum_names(name, vals))
    for name, vals in _HDR.enums.items()
}
CONSTANTS: dict[str, int] = {
    k: v for vals in _HDR.enums.values() for k, v in vals}


def _struct_size_upto(cls, last_field: str) -> int:
    f = getattr(cls, last_field)
    return f.offset + f.size


STRUCT_SIZES: dict[str, int] = {
    name: _struct_size_upto(STRUCTS[name], last)
    for name, last in _HDR.traits.items() if name in STRUCTS
}

# Function name -> (args struct, returns PJRT_Error*), in PJRT_Api order.
API_FUNCTIONS: dict[str, tuple[type, bool]] = {}
for _fn in _HDR.api_fields:
    _ret, _argtype = _HDR.functions[_fn]
    API_FUNCTIONS[_fn] = (STRUCTS[_argtype], _ret != "void")

_ver = {k: int(v) for k, v in re.findall(
    r"#define\s+(PJRT_API_MAJOR|PJRT_API_MINOR)\s+(\d+)", _HEADER_PATH.read_text())}
HEADER_VERSION = (_ver.get("PJRT_API_MAJOR"), _ver.get("PJRT_API_MINOR"))

PJRT_Buffer_Type = BufferType = ENUMS["PJRT_Buffer_Type"]
PJRT_Error_Code = ErrorCode = ENUMS["PJRT_Error_Code"]
PJRT_HostBufferSemantics = HostBufferSemantics = ENUMS["PJRT_HostBufferSemantics"]
PJRT_NamedValue_Type = NamedValueType = ENUMS["PJRT_NamedValue_Type"]
PJRT_Buffer_MemoryLayout_Type = MemoryLayoutType = ENUMS["PJRT_Buffer_MemoryLayout_Type"]


def __getattr__(name):  # module-level: pjrt_capi.PJRT_Foo_Args / enums
    if name in STRUCTS:
        return STRUCTS[name]
    if name in ENUMS:
        return ENUMS[name]
    if name in CONSTANTS:
        return CONSTANTS[name]
    raise AttributeError(name)


# sizeof / selected offsetof, as printed by a gcc-compiled program against the
# API 0.81 header (x86-64).  Checked by _self_check_layouts() when the parsed
# header has that version; check_layouts_with_cc() redoes it for any header.
_GCC_SIZES_0_81 = {
    "PJRT_Api": 984,
    "PJRT_Api_Version": 24,
    "PJRT_ExecuteOptions": 112,
    "PJRT_NamedValue": 56,
    "PJRT_Buffer_MemoryLayout": 80,
    "PJRT_Buffer_MemoryLayout_Tiled": 56,
    "PJRT_Buffer_MemoryLayout_Strides": 32,
    "PJRT_Device_MemoryStats_Args": 192,
    "PJRT_Client_BufferFromHostBuffer_Args": 120,
    "PJRT_Client_Create_Args": 88,
    "PJRT_LoadedExecutable_Execute_Args": 80,
    "PJRT_Buffer_GetMemoryLayout_Args": 104,
    "PJRT_Program": 48,
    "PJRT_Chunk": 32,
    "PJRT_ProcessInfo": 48,
    "PJRT_Executable_DeserializeAndLoad_Args": 64,
}
_GCC_OFFSETS_0_81 = {
    ("PJRT_Api", "pjrt_api_version"): 16,
    ("PJRT_Api", "PJRT_Error_Destroy"): 40,
    ("PJRT_Api", "PJRT_LoadedExecutable_GetDeviceAssignment"): 976,
    ("PJRT_NamedValue", "type"): 32,
    ("PJRT_NamedValue", "float_value"): 40,
    ("PJRT_NamedValue", "value_size"): 48,
    ("PJRT_Buffer_MemoryLayout", "tiled"): 16,
    ("PJRT_Buffer_MemoryLayout", "type"): 72,
    ("PJRT_ExecuteOptions", "launch_id"): 48,
    ("PJRT_ExecuteOptions", "incarnation_ids"): 104,
    ("PJRT_Device_MemoryStats_Args", "peak_pool_bytes_is_set"): 184,
    ("PJRT_Client_BufferFromHostBuffer_Args", "host_buffer_semantics"): 72,
    ("PJRT_Client_BufferFromHostBuffer_Args", "buffer"): 112,
}


def _self_check_layouts(structs: dict | None = None) -> list[str]:
    """Cheap layout sanity check; returns a list of problems (empty = OK).

    1. For every struct with PJRT_DEFINE_STRUCT_TRAITS, sizeof must equal
       X_STRUCT_SIZE rounded up to the struct's alignment (the header's own
       C++ static_assert).
    2. For the 0.81 header, sizes/offsets must match the gcc table above.

    ``structs`` (default ``STRUCTS``) are the ctypes classes to check, by name.
    """
    structs = STRUCTS if structs is None else structs
    problems = []
    for name, upto in STRUCT_SIZES.items():
        cls = structs[name]
        align = ctypes.alignment(cls)
        want = (upto + align - 1) // align * align
        if ctypes.sizeof(cls) != want:
            problems.append(f"{name}: sizeof {ctypes.sizeof(cls)} != "
                            f"STRUCT_SIZE {upto} rounded to {want}")
    if HEADER_VERSION == (0, 81):
        for name, size in _GCC_SIZES_0_81.items():
            if ctypes.sizeof(structs[name]) != size:
                problems.append(f"{name}: sizeof {ctypes.sizeof(structs[name])}"
                                f" != gcc {size}")
        for (name, field), off in _GCC_OFFSETS_0_81.items():
            got = getattr(structs[name], field).offset
            if got != off:
                problems.append(f"{name}.{field}: offset {got} != gcc {off}")
    return problems


_problems = _self_check_layouts()
if _problems:  # a wrong layout would corrupt memory: refuse to load
    raise ImportError("pjrt_capi layout mismatch:\n" + "\n".join(_problems))


def _c_offsets(cls, prefix=""):
    """(C member path, offset) for all leaf fields, flattening anon unions."""
    out = []
    anon = set(getattr(cls, "_anonymous_", ()))
    for fname, ftype in cls._fields_:
        base = getattr(cls, fname).offset
        if fname in anon:
            for path, off in _c_offsets(ftype):
                out.append((prefix + path, base + off))
        else:
            out.append((prefix + fname, base))
    return out


def check_layouts_with_cc(cc: str = "gcc", structs: dict | None = None) -> list[str]:
    """Compile a C program printing sizeof/offsetof of every parsed struct
    and field, and compare with ctypes.  Returns mismatches; raises
    FileNotFoundError if the compiler is missing.  ``structs`` (default
    ``STRUCTS``) are the ctypes classes to compare, by name."""
    lines = ['#include <stdio.h>', '#include <stddef.h>',
             f'#include "{_HEADER_PATH}"', 'int main(void) {']
    expect = {}
    for name, cls in (STRUCTS if structs is None else structs).items():
        lines.append(f'printf("S {name} %zu\\n", sizeof(struct {name}));')
        expect[f"S {name}"] = ctypes.sizeof(cls)
        for path, off in _c_offsets(cls):
            lines.append(f'printf("O {name}.{path} %zu\\n", '
                         f'offsetof(struct {name}, {path}));')
            expect[f"O {name}.{path}"] = off
    lines += ["return 0;", "}"]
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp, "layout.c"), Path(tmp, "layout")
        src.write_text("\n".join(lines))
        subprocess.run([cc, "-std=c11", "-o", str(exe), str(src)], check=True,
                       capture_output=True)
        output = subprocess.run([str(exe)], check=True, capture_output=True,
                                text=True).stdout
    mismatches = []
    for line in output.splitlines():
        key, value = line.rsplit(" ", 1)
        if expect.get(key) != int(value):
            mismatches.append(f"{key}: C {value} ctypes {expect.get(key)}")
    return mismatches


# --------------------------------------------------------------------------
# dtype mapping
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# CompileOptionsProto, hand-encoded (protobuf wire format)
# --------------------------------------------------------------------------
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


# --------------------------------------------------------------------------
# Low-level helpers
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# Errors and the Api
# --------------------------------------------------------------------------

class PjrtError(Exception):
    """A non-null PJRT_Error* (already destroyed; code and message copied)."""

    def __init__(self, code, message: str, function: str | None = None):
        try:
            code = ErrorCode(code)
        except ValueError:
            pass  # keep unknown codes as plain ints
        self.code = code
        self.message = message
        self.function = function
        super().__init__(code, message, function)  # picklable (e.g. xdist)

    def __str__(self):
        where = f"{self.function}: " if self.function else ""
        return f"{where}{self.code_name}: {self.message}"

    @property
    def code_name(self) -> str:
        return self.code.name if isinstance(self.code, ErrorCode) else str(self.code)


class Api:
    """A loaded plugin.  ``api.PJRT_Foo`` is the raw C function pointer."""

    def __init__(self, path=None, initialize: bool = True):
        self.path = str(path or cpu_plugin_path())
        # RTLD_LOCAL so two plugins' symbols cannot interpose on each other.
        self.lib = ctypes.CDLL(self.path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        get_api = self.lib.GetPjrtApi
        get_api.restype = ctypes.c_void_p
        get_api.argtypes = []
        addr = get_api()
        if not addr:
            raise RuntimeError(f"GetPjrtApi() returned NULL in {self.path}")
        self.address = addr
        # The plugin's table may be shorter than ours (older minor version).
        self.struct_size = ctypes.c_size_t.from_address(addr).value
        self.raw = STRUCTS["PJRT_Api"].from_address(addr)
        ver = self.raw.pjrt_api_version
        self.version = (ver.major_version, ver.minor_version)
        self._fns = {}
        if initialize:
            self.call("PJRT_Plugin_Initialize")

    def has(self, fn_name: str) -> bool:
        """True if the plugin's PJRT_Api table has a non-null entry."""
        field = getattr(STRUCTS["PJRT_Api"], fn_name)
        if field.offset + field.size > self.struct_size:
            return False
        return bool(getattr(self.raw, fn_name))

    def function(self, fn_name: str):
        fn = self._fns.get(fn_name)
        if fn is None:
            if fn_name not in API_FUNCTIONS:
                raise AttributeError(f"{fn_name} is not a PJRT_Api function")
            if not self.has(fn_name):
                raise NotImplementedError(f"plugin has no {fn_name}")
            _, returns_error = API_FUNCTIONS[fn_name]
            proto = ctypes.CFUNCTYPE(
                ctypes.c_void_p if returns_error else None, ctypes.c_void_p)
            fn = proto(getattr(self.raw, fn_name))
            self._fns[fn_name] = fn
        return fn

    def __getattr__(self, name):
        if name.startswith("PJRT_") and name in API_FUNCTIONS:
            return self.function(name)
        raise AttributeError(name)

    @staticmethod
    def args_type(fn_name: str) -> type:
        return API_FUNCTIONS[fn_name][0]

    def make_args(self, fn_name: str, struct_size: int | None = None, **fields):
        """Build (but do not send) a ``<fn_name>_Args``."""
        cls = API_FUNCTIONS[fn_name][0]
        args = cls()
        args.struct_size = ctypes.sizeof(cls) if struct_size is None else struct_size
        keep = []
        valid = _field_names(cls)
        ftypes = _all_field_types(cls)
        for key, value in fields.items():
            if key not in valid:
                raise TypeError(f"{cls.__name__} has no field {key!r}")
            if ftypes[key] is ctypes.c_void_p:
                value = _to_pointer(value, keep)
            elif isinstance(value, enum.Enum):
                value = int(value)
            setattr(args, key, value)
        args._keep = keep  # backing storage for pointer fields
        return args

    def call(self, fn_name: str, struct_size: int | None = None, **fields):
        """Build ``<fn_name>_Args`` from ``fields``, call, raise PjrtError on
        error, return the args struct (read outputs from it)."""
        args = self.make_args(fn_name, struct_size=struct_size, **fields)
        self.call_args(fn_name, args)
        return args

    def call_args(self, fn_name: str, args) -> None:
        err = self.function(fn_name)(ctypes.byref(args))
        if err:
            raise self.error_from_ptr(err, fn_name)

    def error_from_ptr(self, err: int, fn_name: str | None = None) -> PjrtError:
        """Read code and message of a PJRT_Error*, destroy it, wrap it."""
        msg_args = self.make_args("PJRT_Error_Message", error=err)
        self.function("PJRT_Error_Message")(ctypes.byref(msg_args))
        message = _string_at(msg_args.message, msg_args.message_size)
        code_args = self.make_args("PJRT_Error_GetCode", error=err)
        err2 = self.function("PJRT_Error_GetCode")(ctypes.byref(code_args))
        code = code_args.code
        if err2:
            self.destroy_error(err2)
            code = ErrorCode.UNKNOWN
        self.destroy_error(err)
        return PjrtError(code, message, fn_name)

    def destroy_error(self, err: int) -> None:
        args = self.make_args("PJRT_Error_Destroy", error=err)
        self.function("PJRT_Error_Destroy")(ctypes.byref(args))

    def plugin_attributes(self) -> dict:
        a = self.call("PJRT_Plugin_Attributes")
        return _named_values_out(a.attributes, a.num_attributes)

    def create_client(self, options: dict | None = None) -> "Client":
        return Client(self, options)

    def __repr__(self):
        return f"<Api {self.path} v{self.version[0]}.{self.version[1]}>"


def _all_field_types(cls) -> dict:
    out = {}
    anon = set(getattr(cls, "_anonymous_", ()))
    for fname, ftype in cls._fields_:
        if fname in anon:
            out.update(_all_field_types(ftype))
        else:
            out[fname] = ftype
    return out


# --------------------------------------------------------------------------
# Pythonic layer
# --------------------------------------------------------------------------

class _Handle:
    """Something with a C pointer ``ptr`` and an Api."""

    ptr: int | None

    def __init__(self, api: Api, ptr: int):
        self.api = api
        self.ptr = ptr

    @property
    def _as_parameter_(self):  # lets handles be passed straight to ctypes calls
        return ctypes.c_void_p(self.ptr)

    def __eq__(self, other):
        return type(other) is type(self) and other.ptr == self.ptr

    def __hash__(self):
        return hash((type(self).__name__, self.ptr))

    def __repr__(self):
        return f"<{type(self).__name__} 0x{(self.ptr or 0):x}>"


class _Owned(_Handle):
    """A handle that must be destroyed; registered with its client so that
    Client.close() can free leftovers before the client itself."""

    _destroy_fn: str = ""
    _destroy_field: str = ""

    def __init__(self, api: Api, ptr: int, client: "Client | None"):
        super().__init__(api, ptr)
        self.client = client
        if client is not None:
            client._owned.add(self)

    @property
    def alive(self) -> bool:
        return self.ptr is not None

    def _check(self):
        if self.ptr is None:
            raise ValueError(f"{type(self).__name__} already destroyed")

    def detach(self) -> int | None:
        """Give up ownership; the caller must free the returned pointer."""
        ptr, self.ptr = self.ptr, None
        return ptr

    def destroy(self) -> None:
        if self.ptr is None:
            return
        ptr, self.ptr = self.ptr, None
        self.api.call(self._destroy_fn, **{self._destroy_field: ptr})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        # Leak guard only.  Skip at interpreter exit and after client close.
        if sys.is_finalizing() or getattr(self, "ptr", None) is None:
            return
        client = getattr(self, "client", None)
        if client is not None and client.ptr is None:
            return
        try:
            self.destroy()
        except Exception:
            pass


class Event(_Owned):
    _destroy_fn, _destroy_field = "PJRT_Event_Destroy", "event"

    # CFUNCTYPE objects handed to plugins; never freed because the plugin may
    # call them late and freeing a running thunk would crash.
    _CALLBACK_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
    _callbacks_alive: list = []
    callback_exceptions: list = []  # exceptions raised inside callbacks

    @property
    def is_ready(self) -> bool:
        self._check()
        return bool(self.api.call("PJRT_Event_IsReady", event=self.ptr).is_ready)

    def await_(self) -> None:
        """Block until ready; raise PjrtError if the event carries an error."""
        self._check()
        self.api.call("PJRT_Event_Await", event=self.ptr)

    def error(self) -> PjrtError | None:
        """The event's error (call only when ready), without raising."""
        self._check()
        try:
            self.api.call("PJRT_Event_Error", event=self.ptr)
        except PjrtError as e:
            return e
        return None

    def on_ready(self, callback) -> None:
        """Register ``callback(error: PjrtError | None)``; it may run on a
        plugin thread or synchronously inside this call."""
        self._check()
        api = self.api

        def trampoline(err, _user_arg):
            try:
                callback(api.error_from_ptr(err, "PJRT_Event_OnReady")
                         if err else None)
            except BaseException as e:  # must not propagate into C
                Event.callback_exceptions.append(e)

        cb = self._CALLBACK_T(trampoline)
        Event._callbacks_alive.append(cb)
        self.api.call("PJRT_Event_OnReady", event=self.ptr, callback=cb,
                      user_arg=None)


class Memory(_Handle):
    def __init__(self, client: "Client", ptr: int):
        super().__init__(client.api, ptr)
        self.client = client

    def _str(self, fn, out):
        a = self.api.call(fn, memory=self.ptr)
        return _string_at(getattr(a, out), getattr(a, out + "_size"))

    @property
    def id(self) -> int:
        return self.api.call("PJRT_Memory_Id", memory=self.ptr).id

    @property
    def kind(self) -> str:
        return self._str("PJRT_Memory_Kind", "kind")

    @property
    def kind_id(self) -> int:
        return self.api.call("PJRT_Memory_Kind_Id", memory=self.ptr).kind_id

    @property
    def debug_string(self) -> str:
        return self._str("PJRT_Memory_DebugString", "debug_string")

    @property
    def to_string(self) -> str:
        return self._str("PJRT_Memory_ToString", "to_string")

    @property
    def addressable_by_devices(self) -> list["Device"]:
        a = self.api.call("PJRT_Memory_AddressableByDevices", memory=self.ptr)
        return [Device(self.client, p) for p in _ptr_array(a.devices, a.num_devices)]


class Device(_Handle):
    def __init__(self, client: "Client", ptr: int):
        super().__init__(client.api, ptr)
        self.client = client
        self._desc = None

    @property
    def description(self) -> int:
        """PJRT_DeviceDescription* (owned by the device)."""
        if self._desc is None:
            self._desc = self.api.call("PJRT_Device_GetDescription",
                                       device=self.ptr).device_description
        return self._desc

    def _desc_call(self, fn):
        return self.api.call(fn, device_description=self.description)

    def _desc_str(self, fn, out):
        a = self._desc_call(fn)
        return _string_at(getattr(a, out), getattr(a, out + "_size"))

    @property
    def id(self) -> int:
        return self._desc_call("PJRT_DeviceDescription_Id").id

    @property
    def process_index(self) -> int:
        return self._desc_call("PJRT_DeviceDescription_ProcessIndex").process_index

    @property
    def kind(self) -> str:
        return self._desc_str("PJRT_DeviceDescription_Kind", "device_kind")

    @property
    def debug_string(self) -> str:
        return self._desc_str("PJRT_DeviceDescription_DebugString", "debug_string")

    @property
    def to_string(self) -> str:
        return self._desc_str("PJRT_DeviceDescription_ToString", "to_string")

    def attributes(self) -> dict:
        a = self._desc_call("PJRT_DeviceDescription_Attributes")
        return _named_values_out(a.attributes, a.num_attributes)

    @property
    def local_hardware_id(self) -> int:
        return self.api.call("PJRT_Device_LocalHardwareId",
                             device=self.ptr).local_hardware_id

    @property
    def is_addressable(self) -> bool:
        return bool(self.api.call("PJRT_Device_IsAddressable",
                                  device=self.ptr).is_addressable)

    @property
    def addressable_memories(self) -> list[Memory]:
        a = self.api.call("PJRT_Device_AddressableMemories", device=self.ptr)
        return [Memory(self.client, p) for p in _ptr_array(a.memories, a.num_memories)]

    @property
    def default_memory(self) -> Memory:
        return Memory(self.client, self.api.call(
            "PJRT_Device_DefaultMemory", device=self.ptr).memory)

    def memory_stats(self) -> dict:
        """bytes_in_use plus every optional stat the plugin marked as set."""
        a = self.api.call("PJRT_Device_MemoryStats", device=self.ptr)
        out = {"bytes_in_use": a.bytes_in_use}
        for name in _field_names(type(a)):
            if name.endswith("_is_set") and getattr(a, name):
                stat = name[:-len("_is_set")]
                out[stat] = getattr(a, stat)
        return out

    def __repr__(self):
        if self.client.ptr is None:  # the device died with its client
            return super().__repr__()
        return f"<Device id={self.id} kind={self.kind!r}>"


class Buffer(_Owned):
    _destroy_fn, _destroy_field = "PJRT_Buffer_Destroy", "buffer"

    # (host array, done event) pairs whose zero-copy buffer was destroyed but
    # whose done event had not fired yet: leaked on purpose, never freed early.
    _orphaned_host_data: list = []

    def __init__(self, client: "Client", ptr: int):
        super().__init__(client.api, ptr, client)
        self._host_hold = None  # (array, done Event) for zero-copy semantics

    def _get(self, fn, out):
        self._check()
        return getattr(self.api.call(fn, buffer=self.ptr), out)

    @property
    def element_type(self):
        t = self._get("PJRT_Buffer_ElementType", "type")
        try:
            return BufferType(t)
        except ValueError:
            return t

    @property
    def dtype(self) -> np.dtype:
        return buffer_type_to_dtype(self.element_type)

    @property
    def dims(self) -> tuple[int, ...]:
        self._check()
        a = self.api.call("PJRT_Buffer_Dimensions", buffer=self.ptr)
        if not a.num_dims:
            return ()
        return tuple((ctypes.c_int64 * a.num_dims).from_address(a.dims))

    shape = dims

    @property
    def unpadded_dims(self) -> tuple[int, ...]:
        self._check()
        a = self.api.call("PJRT_Buffer_UnpaddedDimensions", buffer=self.ptr)
        if not a.num_dims:
            return ()
        return tuple((ctypes.c_int64 * a.num_dims).from_address(a.unpadded_dims))

    @property
    def on_device_size(self) -> int:
        return self._get("PJRT_Buffer_OnDeviceSizeInBytes", "on_device_size_in_bytes")

    @property
    def device(self) -> Device:
        return Device(self.client, self._get("PJRT_Buffer_Device", "device"))

    @property
    def memory(self) -> Memory:
        return Memory(self.client, self._get("PJRT_Buffer_Memory", "memory"))

    @property
    def is_deleted(self) -> bool:
        return bool(self._get("PJRT_Buffer_IsDeleted", "is_deleted"))

    @property
    def is_on_cpu(self) -> bool:
        return bool(self._get("PJRT_Buffer_IsOnCpu", "is_on_cpu"))

    def ready_event(self) -> Event:
        return Event(self.api, self._get("PJRT_Buffer_ReadyEvent", "event"),
                     self.client)

    def block_until_ready(self) -> None:
        with self.ready_event() as ev:
            ev.await_()

    def delete(self) -> None:
        self._check()
        self.api.call("PJRT_Buffer_Delete", buffer=self.ptr)

    def host_size(self) -> int:
        """Bytes ToHostBuffer needs (the dst=NULL query form)."""
        self._check()
        return self.api.call("PJRT_Buffer_ToHostBuffer", src=self.ptr,
                             dst=None, dst_size=0).dst_size

    def to_numpy(self) -> np.ndarray:
        """Copy to a new dense row-major array and wait for the copy."""
        self._check()
        out = np.empty(self.dims, dtype=self.dtype)
        a = self.api.call("PJRT_Buffer_ToHostBuffer", src=self.ptr,
                          dst=out.ctypes.data, dst_size=out.nbytes)
        if a.event:
            ev = Event(self.api, a.event, self.client)
            try:
                ev.await_()
            finally:
                ev.destroy()
        return out

    def copy_to_device(self, device: Device) -> "Buffer":
        return Buffer(self.client, self.api.call(
            "PJRT_Buffer_CopyToDevice", buffer=self.ptr,
            dst_device=device).dst_buffer)

    def copy_to_memory(self, memory: Memory) -> "Buffer":
        return Buffer(self.client, self.api.call(
            "PJRT_Buffer_CopyToMemory", buffer=self.ptr,
            dst_memory=memory).dst_buffer)

    def destroy(self) -> None:
        super().destroy()
        if self._host_hold is not None:
            arr, ev = self._host_hold
            self._host_hold = None
            if ev.is_ready:
                ev.destroy()
            else:
                Buffer._orphaned_host_data.append((arr, ev))


class Executable(_Owned):
    """PJRT_Executable (compiled, not necessarily loaded)."""
    _destroy_fn, _destroy_field = "PJRT_Executable_Destroy", "executable"

    def _call(self, fn):
        self._check()
        return self.api.call(fn, executable=self.ptr)

    @property
    def name(self) -> str:
        a = self._call("PJRT_Executable_Name")
        return _string_at(a.executable_name, a.executable_name_size)

    @property
    def num_outputs(self) -> int:
        return self._call("PJRT_Executable_NumOutputs").num_outputs

    @property
    def num_replicas(self) -> int:
        return self._call("PJRT_Executable_NumReplicas").num_replicas

    @property
    def num_partitions(self) -> int:
        return self._call("PJRT_Executable_NumPartitions").num_partitions

    @property
    def size_of_generated_code(self) -> int:
        return self._call("PJRT_Executable_SizeOfGeneratedCodeInBytes").size_in_bytes

    @property
    def output_element_types(self) -> list:
        a = self._call("PJRT_Executable_OutputElementTypes")
        if not a.num_output_types:
            return []
        raw = (ctypes.c_int * a.num_output_types).from_address(a.output_types)
        return [BufferType(t) if t in BufferType._value2member_map_ else t
                for t in raw]

    @property
    def output_dimensions(self) -> list[tuple[int, ...]]:
        a = self._call("PJRT_Executable_OutputDimensions")
        n = a.num_outputs
        if not n:
            return []
        sizes = list((ctypes.c_size_t * n).from_address(a.dim_sizes))
        total = sum(sizes)
        flat = list((ctypes.c_int64 * total).from_address(a.dims)) if total else []
        out, pos = [], 0
        for s in sizes:
            out.append(tuple(flat[pos:pos + s]))
            pos += s
        return out

    @property
    def output_memory_kinds(self) -> list[str]:
        a = self._call("PJRT_Executable_OutputMemoryKinds")
        n = a.num_outputs
        if not n:
            return []
        ptrs = _ptr_array(a.memory_kinds, n)
        sizes = list((ctypes.c_size_t * n).from_address(a.memory_kind_sizes))
        return [_string_at(p, s) for p, s in zip(ptrs, sizes)]

    @property
    def fingerprint(self) -> bytes:
        a = self._call("PJRT_Executable_Fingerprint")
        if not a.executable_fingerprint:
            return b""
        return ctypes.string_at(a.executable_fingerprint,
                                a.executable_fingerprint_size)

    def cost_analysis(self) -> dict:
        a = self._call("PJRT_Executable_GetCostAnalysis")
        return _named_values_out(a.properties, a.num_properties)

    def compiled_memory_stats(self) -> dict:
        a = self._call("PJRT_Executable_GetCompiledMemoryStats")
        return {name: getattr(a, name) for name, _ in type(a)._fields_[3:]}

    def serialize(self) -> bytes:
        a = self._call("PJRT_Executable_Serialize")
        try:
            return ctypes.string_at(a.serialized_bytes, a.serialized_bytes_size)
        finally:
            if a.serialized_executable_deleter:
                ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
                    a.serialized_executable_deleter)(a.serialized_executable)

    def optimized_program(self) -> tuple[str, bytes]:
        """(format, code) via the two-call size-then-fill protocol."""
        self._check()
        prog = STRUCTS["PJRT_Program"]()
        prog.struct_size = ctypes.sizeof(prog)
        self.api.call("PJRT_Executable_OptimizedProgram", executable=self.ptr,
                      program=prog)
        buf = ctypes.create_string_buffer(max(prog.code_size, 1))
        prog.code = ctypes.addressof(buf)
        self.api.call("PJRT_Executable_OptimizedProgram", executable=self.ptr,
                      program=prog)
        return (_string_at(prog.format, prog.format_size),
                buf.raw[:prog.code_size])


class LoadedExecutable(_Owned):
    _destroy_fn, _destroy_field = "PJRT_LoadedExecutable_Destroy", "executable"

    def __init__(self, client: "Client", ptr: int):
        super().__init__(client.api, ptr, client)
        self._num_outputs = None

    def get_executable(self) -> Executable:
        """New PJRT_Executable; the caller destroys it (or uses ``with``)."""
        self._check()
        return Executable(self.api, self.api.call(
            "PJRT_LoadedExecutable_GetExecutable",
            loaded_executable=self.ptr).executable, self.client)

    @property
    def num_outputs(self) -> int:
        if self._num_outputs is None:
            with self.get_executable() as ex:
                self._num_outputs = ex.num_outputs
        return self._num_outputs

    @property
    def addressable_devices(self) -> list[Device]:
        self._check()
        a = self.api.call("PJRT_LoadedExecutable_AddressableDevices",
                          executable=self.ptr)
        return [Device(self.client, p) for p in
                _ptr_array(a.addressable_devices, a.num_addressable_devices)]

    @property
    def fingerprint(self) -> bytes:
        self._check()
        a = self.api.call("PJRT_LoadedExecutable_Fingerprint", executable=self.ptr)
        if not a.executable_fingerprint:
            return b""
        return ctypes.string_at(a.executable_fingerprint,
                                a.executable_fingerprint_size)

    def delete(self) -> None:
        self._check()
        self.api.call("PJRT_LoadedExecutable_Delete", executable=self.ptr)

    @property
    def is_deleted(self) -> bool:
        self._check()
        return bool(self.api.call("PJRT_LoadedExecutable_IsDeleted",
                                  executable=self.ptr).is_deleted)

    def execute_async(self, args, non_donatable=(), execute_device=None,
                      options_struct_size=None, launch_id: int = 0):
        """Launch; returns (outputs per device, completion Event per device).
        ``args`` is a list of Buffers (one device) or a list of such lists."""
        self._check()
        if args and isinstance(args[0], (list, tuple)):
            per_device = [list(a) for a in args]
        else:
            per_device = [list(args)]
        n_dev, n_args = len(per_device), len(per_device[0])
        if any(len(a) != n_args for a in per_device):
            raise ValueError("every device needs the same number of arguments")
        n_out = self.num_outputs
        vp = ctypes.c_void_p
        arg_rows = [(vp * max(n_args, 1))(*[b.ptr for b in row]) for row in per_device]
        arg_lists = (vp * n_dev)(*[ctypes.addressof(r) for r in arg_rows])
        out_rows = [(vp * max(n_out, 1))() for _ in range(n_dev)]
        out_lists = (vp * n_dev)(*[ctypes.addressof(r) for r in out_rows])
        events = (vp * n_dev)()

        opts = STRUCTS["PJRT_ExecuteOptions"]()
        opts.struct_size = (ctypes.sizeof(opts) if options_struct_size is None
                            else options_struct_size)
        opts.launch_id = launch_id
        keep = [arg_rows, out_rows]
        if non_donatable:
            idx = (ctypes.c_int64 * len(non_donatable))(*non_donatable)
            keep.append(idx)
            opts.non_donatable_input_indices = ctypes.addressof(idx)
            opts.num_non_donatable_input_indices = len(non_donatable)

        self.api.call("PJRT_LoadedExecutable_Execute", executable=self.ptr,
                      options=opts, argument_lists=arg_lists,
                      num_devices=n_dev, num_args=n_args,
                      output_lists=out_lists, device_complete_events=events,
                      execute_device=execute_device)
        outputs = [[Buffer(self.client, row[i]) for i in range(n_out)]
                   for row in out_rows]
        done = [Event(self.api, e, self.client) if e else None for e in events]
        return outputs, done

    def execute(self, args, non_donatable=(), execute_device=None,
                options_struct_size=None, launch_id: int = 0) -> list[list[Buffer]]:
        """Run and wait for completion; returns outputs[device][output]."""
        outputs, done = self.execute_async(
            args, non_donatable=non_donatable, execute_device=execute_device,
            options_struct_size=options_struct_size, launch_id=launch_id)
        first_error = None
        for ev in done:
            if ev is None:
                continue
            try:
                ev.await_()
            except PjrtError as e:
                first_error = first_error or e
            finally:
                ev.destroy()
        if first_error is not None:
            for row in outputs:
                for b in row:
                    b.destroy()
            raise first_error
        return outputs


class Client(_Handle):
    """PJRT_Client; ``with Client(api) as c:`` closes it (and leftovers)."""

    def __init__(self, api: Api, options: dict | None = None):
        arr, n, keep = _named_values_in(options)
        a = api.call("PJRT_Client_Create", create_options=arr, num_options=n)
        del keep
        super().__init__(api, a.client)
        self._owned = weakref.WeakSet()

    def close(self) -> None:
        """Destroy every still-alive object made through this client, then
        the client."""
        if self.ptr is None:
            return
        order = (Event, Buffer, Executable, LoadedExecutable)
        leftovers = sorted(list(self._owned),
                           key=lambda o: order.index(type(o)) if type(o) in order else 9)
        for obj in leftovers:
            try:
                obj.destroy()
            except PjrtError:
                pass
        ptr, self.ptr = self.ptr, None
        self.api.call("PJRT_Client_Destroy", client=ptr)

    destroy = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if sys.is_finalizing() or getattr(self, "ptr", None) is None:
            return
        try:
            self.close()
        except Exception:
            pass

    def _call(self, fn, **fields):
        if self.ptr is None:
            raise ValueError("client is closed")
        return self.api.call(fn, client=self.ptr, **fields)

    @property
    def platform_name(self) -> str:
        a = self._call("PJRT_Client_PlatformName")
        return _string_at(a.platform_name, a.platform_name_size)

    @property
    def platform_version(self) -> str:
        a = self._call("PJRT_Client_PlatformVersion")
        return _string_at(a.platform_version, a.platform_version_size)

    @property
    def process_index(self) -> int:
        return self._call("PJRT_Client_ProcessIndex").process_index

    def devices(self) -> list[Device]:
        a = self._call("PJRT_Client_Devices")
        return [Device(self, p) for p in _ptr_array(a.devices, a.num_devices)]

    def addressable_devices(self) -> list[Device]:
        a = self._call("PJRT_Client_AddressableDevices")
        return [Device(self, p) for p in
                _ptr_array(a.addressable_devices, a.num_addressable_devices)]

    def lookup_device(self, device_id: int) -> Device:
        return Device(self, self._call("PJRT_Client_LookupDevice",
                                       id=device_id).device)

    def lookup_addressable_device(self, local_hardware_id: int) -> Device:
        return Device(self, self._call(
            "PJRT_Client_LookupAddressableDevice",
            local_hardware_id=local_hardware_id).addressable_device)

    def addressable_memories(self) -> list[Memory]:
        a = self._call("PJRT_Client_AddressableMemories")
        return [Memory(self, p) for p in
                _ptr_array(a.addressable_memories, a.num_addressable_memories)]

    def default_device_assignment(self, num_replicas: int,
                                  num_partitions: int = 1) -> list[int]:
        n = num_replicas * num_partitions
        out = (ctypes.c_int * n)()
        self._call("PJRT_Client_DefaultDeviceAssignment",
                   num_replicas=num_replicas, num_partitions=num_partitions,
                   default_assignment_size=n, default_assignment=out)
        return list(out)

    def buffer_from_numpy(self, arr, device: Device | None = None,
                          memory: Memory | None = None,
                          semantics=HostBufferSemantics.kImmutableOnlyDuringCall,
                          byte_strides=None, device_layout=None) -> Buffer:
        """Host -> device.  Without ``byte_strides`` the array is made dense
        row-major first; with them, ``arr``'s own memory is passed as is.
        Defaults to the first addressable device when neither device nor
        memory is given."""
        arr = np.asarray(arr)
        if byte_strides is None and not arr.flags.c_contiguous:
            arr = arr.copy(order="C")  # (ascontiguousarray would turn 0-d into 1-d)
        if device is None and memory is None:
            device = self.addressable_devices()[0]
        dims = (ctypes.c_int64 * arr.ndim)(*arr.shape)
        strides = None
        if byte_strides is not None:
            strides = (ctypes.c_int64 * len(byte_strides))(*byte_strides)
        a = self._call(
            "PJRT_Client_BufferFromHostBuffer",
            data=arr.ctypes.data, type=dtype_to_buffer_type(arr.dtype),
            dims=dims, num_dims=arr.ndim,
            byte_strides=strides,
            num_byte_strides=0 if byte_strides is None else len(byte_strides),
            host_buffer_semantics=int(semantics), device=device, memory=memory,
            device_layout=device_layout)
        buf = Buffer(self, a.buffer)
        if a.done_with_host_buffer:
            done = Event(self.api, a.done_with_host_buffer, self)
            zero_copy = int(semantics) in (
                HostBufferSemantics.kImmutableZeroCopy,
                HostBufferSemantics.kMutableZeroCopy)
            if zero_copy:  # host memory backs the buffer until it is freed
                buf._host_hold = (arr, done)
            else:
                try:
                    done.await_()
                finally:
                    done.destroy()
        return buf

    def compile(self, code: bytes | str, format: str = "mlir",
                compile_options: bytes | None = None) -> LoadedExecutable:
        """Compile ``code`` ("mlir": text or bytecode; "hlo": serialized
        HloModuleProto).  ``compile_options`` is a serialized
        CompileOptionsProto; None means ``compile_options_proto()`` (1
        replica, 1 partition).  b"" is passed through as the all-defaults
        proto, whose num_replicas=0 makes the stock CPU plugin abort the
        process (CHECK replica_count > 0), so only use it deliberately."""
        if compile_options is None:
            compile_options = compile_options_proto()
        if isinstance(code, str):
            code = code.encode()
        fmt = format.encode()
        prog = STRUCTS["PJRT_Program"]()
        prog.struct_size = ctypes.sizeof(prog)
        code_buf = ctypes.create_string_buffer(code, len(code))
        fmt_buf = ctypes.create_string_buffer(fmt, len(fmt))
        prog.code, prog.code_size = ctypes.addressof(code_buf), len(code)
        prog.format, prog.format_size = ctypes.addressof(fmt_buf), len(fmt)
        a = self._call("PJRT_Client_Compile", program=prog,
                       compile_options=compile_options,
                       compile_options_size=len(compile_options))
        return LoadedExecutable(self, a.executable)

    def deserialize_and_load(self, data: bytes,
                             compile_options: bytes | None = None) -> LoadedExecutable:
        a = self._call(
            "PJRT_Executable_DeserializeAndLoad", serialized_executable=data,
            serialized_executable_size=len(data),
            overridden_serialized_compile_options=compile_options,
            overridden_serialized_compile_options_size=len(compile_options or b""))
        return LoadedExecutable(self, a.loaded_executable)


if __name__ == "__main__":  # quick manual check: python -m pjrt_neuron.pjrt_capi
    print("header", _HEADER_PATH, "version", HEADER_VERSION)
    print(len(STRUCTS), "structs,", len(ENUMS), "enums,",
          len(API_FUNCTIONS), "API functions")
    print("self-check problems:", _self_check_layouts())
    try:
        print("cc check mismatches:", check_layouts_with_cc())
    except (FileNotFoundError, subprocess.CalledProcessError) as e:
        print("cc check skipped:", e)
