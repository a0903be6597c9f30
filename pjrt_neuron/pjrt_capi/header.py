"""pjrt_c_api.h, parsed at import: every struct as a ctypes.Structure (STRUCTS), every named
enum as an IntEnum (ENUMS), every enumerator (CONSTANTS), every X_STRUCT_SIZE (STRUCT_SIZES) and
the PJRT_Api functions with their argument structs (API_FUNCTIONS). Pointer fields are c_void_p."""

from __future__ import annotations

import ctypes
import enum
import importlib.util
import os
import re
from pathlib import Path

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
