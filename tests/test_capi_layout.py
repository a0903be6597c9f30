"""The ctypes structs of tests/pjrt_capi.py against pjrt_c_api.h.

pjrt_capi (its header.py) builds its structs by parsing the header; a size or offset that differs from the C
compiler's would make every C API test write past or beside the fields the plugin reads. Here
the layout is compared with the header's own STRUCT_SIZE macros and with a C program compiled
against the header, and the comparison is shown to catch a wrong struct.
"""

import ctypes
import shutil

import pytest

import pjrt_capi as P


def _compiler() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler to lay out pjrt_c_api.h")
    return cc


def _without_last_field(name: str) -> dict:
    """STRUCTS with `name` missing its last field, as a parser that dropped a member would make it."""
    cls = P.STRUCTS[name]
    short = type(name, (ctypes.Structure,), {"_fields_": cls._fields_[:-1]})
    return {**P.STRUCTS, name: short}


def test_header_was_parsed():
    assert P.HEADER_VERSION >= (0, 81)
    assert len(P.STRUCTS) > 100
    assert "PJRT_Client_Compile_Args" in P.STRUCT_SIZES


def test_struct_sizes_match_the_header_struct_size_macros():
    assert P._self_check_layouts() == []


def test_every_struct_and_field_matches_the_c_compiler():
    assert P.check_layouts_with_cc(_compiler()) == []


def test_a_struct_missing_a_field_is_caught():
    problems = P._self_check_layouts(_without_last_field("PJRT_Chunk"))
    assert any(p.startswith("PJRT_Chunk: sizeof") for p in problems), problems
    mismatches = P.check_layouts_with_cc(_compiler(), _without_last_field("PJRT_Chunk"))
    assert mismatches == [f"S PJRT_Chunk: C {ctypes.sizeof(P.STRUCTS['PJRT_Chunk'])} ctypes "
                          f"{ctypes.sizeof(P.STRUCTS['PJRT_Chunk']) - 8}"], mismatches


def test_a_field_at_the_wrong_offset_is_caught():
    # PJRT_Api_Version {size_t struct_size; void* extension_start; int major_version;
    # int minor_version;}: a 64-bit major_version moves minor_version and grows the struct.
    fields = [(n, ctypes.c_int64 if n == "major_version" else t) for n, t in P.STRUCTS["PJRT_Api_Version"]._fields_]
    wide = type("PJRT_Api_Version", (ctypes.Structure,), {"_fields_": fields})
    structs = {**P.STRUCTS, "PJRT_Api_Version": wide}
    assert sorted(P.check_layouts_with_cc(_compiler(), structs)) == [
        "O PJRT_Api_Version.minor_version: C 20 ctypes 24",
        "S PJRT_Api_Version: C 24 ctypes 32",
    ]
    assert "PJRT_Api_Version: sizeof 32 != gcc 24" in P._self_check_layouts(structs)
