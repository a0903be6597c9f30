"""The parsed structs' layouts checked against C: the header's own struct sizes and a table
printed by gcc, at import (a wrong layout would corrupt memory), or a C compiler on demand."""

from __future__ import annotations

import ctypes
import subprocess
import tempfile
from pathlib import Path

from pjrt_neuron.pjrt_capi.header import _HEADER_PATH, HEADER_VERSION, STRUCT_SIZES, STRUCTS

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
