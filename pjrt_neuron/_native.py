"""The plugin library's helper exports (PjrtNeuron_*), loaded once, every ctypes signature declared here.

The library holds the tables, formats and rules (settings, instance types, the compile cache's
directory and entry format, sizes, the version); the Python package reads them here and keeps no
copies. Text comes back through a caller's buffer: each function returns the length it needs,
and is called again with a larger buffer when the first one was too small.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import threading

from pjrt_neuron._library import ConfigurationError, library_path

_lock = threading.Lock()
_library: ctypes.CDLL | None = None

_TEXT_OUT = [ctypes.c_char_p, ctypes.c_size_t]
_SIGNATURES = {
    "PjrtNeuron_Version": (ctypes.c_long, _TEXT_OUT),
    "PjrtNeuron_Settings": (ctypes.c_long, _TEXT_OUT),
    "PjrtNeuron_CheckSettings": (ctypes.c_long, [ctypes.c_char_p, *_TEXT_OUT]),
    "PjrtNeuron_InstanceTypes": (ctypes.c_long, _TEXT_OUT),
    "PjrtNeuron_CoreGenerations": (ctypes.c_long, _TEXT_OUT),
    "PjrtNeuron_DescribeInstance": (ctypes.c_long, [ctypes.c_char_p, ctypes.c_int, *_TEXT_OUT]),
    "PjrtNeuron_CompileCacheDirectory": (ctypes.c_long, _TEXT_OUT),
    "PjrtNeuron_CompileCacheFormat": (ctypes.c_long, _TEXT_OUT),
    "PjrtNeuron_InspectCacheEntry": (ctypes.c_long, [ctypes.c_char_p, *_TEXT_OUT]),
    "PjrtNeuron_ParseSize": (ctypes.c_long, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), *_TEXT_OUT]),
    "PjrtNeuron_CompileCacheMetrics": (ctypes.c_long, _TEXT_OUT),
    "PjrtNeuron_PrecompileProgram": (ctypes.c_int, [ctypes.c_char_p, *_TEXT_OUT]),
    "PjrtNeuron_EngineReport": (ctypes.c_long, [ctypes.c_int, *_TEXT_OUT]),
}


def library() -> ctypes.CDLL:
    """libpjrt_neuron.so (library_path()), loaded on first use with its signatures declared."""
    global _library
    with _lock:
        if _library is None:
            path = library_path()
            loaded = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
            for name, (restype, argtypes) in _SIGNATURES.items():
                try:
                    function = getattr(loaded, name)
                except AttributeError:
                    raise ConfigurationError(
                        f"{path} has no {name}: it is older than this pjrt_neuron package; reinstall pjrt-neuron "
                        "(or unset PJRT_NEURON_LIBRARY_PATH)") from None
                function.restype = restype
                function.argtypes = argtypes
            _library = loaded
        return _library


def _text(name: str, *args) -> tuple[int, str]:
    """Calls a function that writes text into a buffer; its result and the whole text."""
    function = getattr(library(), name)
    size = 4096
    while True:
        out = ctypes.create_string_buffer(size)
        result = function(*args, out, size)
        needed = len(out.value)
        if result < size and needed < size - 1:
            return result, out.value.decode()
        size = max(result, needed) * 2 + 1


def version() -> str:
    """The library's version, as its build read it from pyproject.toml."""
    return _text("PjrtNeuron_Version")[1]


@functools.lru_cache(maxsize=None)
def settings() -> tuple[dict, ...]:
    """The settings table: name, kind, default, default_text, meaning, allowed, choices, read_by."""
    return tuple(json.loads(_text("PjrtNeuron_Settings")[1]))


def setting(name: str) -> dict:
    for row in settings():
        if row["name"] == name:
            return row
    raise KeyError(name)


def check_settings(*names: str) -> None:
    """Raises ConfigurationError, naming the variable and what is allowed, when the environment's
    value of one of `names` (every setting when none is given) is not valid."""
    result, message = _text("PjrtNeuron_CheckSettings", ",".join(names).encode())
    if result != 0:
        raise ConfigurationError(message)


@functools.lru_cache(maxsize=None)
def instance_types() -> tuple[dict, ...]:
    """The instance table: name, chips, physical_cores_per_chip, hbm_bytes_per_chip, core_generation, ..."""
    return tuple(json.loads(_text("PjrtNeuron_InstanceTypes")[1]))


@functools.lru_cache(maxsize=None)
def core_generations() -> tuple[dict, ...]:
    """Per-generation figures for estimates: core_generation, matmul_tflops_bf16/fp8/fp32 (a chip),
    vector/scalar_tflops_per_core, hbm/link_bytes_per_second (a chip), sbuf_bytes_per_core; the estimate's
    own constants (launch, collective latency, efficiencies) are in pjrt_neuron/estimation/model.py's CONSTANTS."""
    return tuple(json.loads(_text("PjrtNeuron_CoreGenerations")[1]))


def describe_instance(instance_type: str, logical_nc_config: int) -> dict:
    result, text = _text("PjrtNeuron_DescribeInstance", instance_type.encode(), logical_nc_config)
    if result < 0:
        raise ConfigurationError(text)
    return json.loads(text)


def compile_cache_directory() -> str:
    return _text("PjrtNeuron_CompileCacheDirectory")[1]


@functools.lru_cache(maxsize=None)
def compile_cache_format() -> dict:
    """magic, entry_suffix, failed_suffix, lock_suffix, temporary_marker."""
    return json.loads(_text("PjrtNeuron_CompileCacheFormat")[1])


def inspect_cache_entry(path: str) -> dict:
    """valid, problem, header (the header line's text, or None), payload_bytes; OSError when unreadable."""
    result, text = _text("PjrtNeuron_InspectCacheEntry", os.fsencode(path))
    if result < 0:
        raise OSError(text)
    return json.loads(text)


def parse_size(text: str) -> int:
    """Bytes in a size like 500M or 10G, as the plugin reads PJRT_NEURON_COMPILE_CACHE_MAX_SIZE."""
    size = ctypes.c_int64()
    result, message = _text("PjrtNeuron_ParseSize", text.encode(), ctypes.byref(size))
    if result != 0:
        raise ConfigurationError(message)
    return size.value


def compile_cache_metrics() -> dict:
    return json.loads(_text("PjrtNeuron_CompileCacheMetrics")[1])


def precompile_program(record_path: str) -> tuple[int, str]:
    """0 compiled, 1 already cached, -1 failed; and the error message."""
    message = ctypes.create_string_buffer(8192)
    result = library().PjrtNeuron_PrecompileProgram(os.fsencode(record_path), message, len(message))
    return result, message.value.decode(errors="replace")


def engine_report(with_memory: bool = False) -> dict:
    """The engine a client would run on ("engine": "sim" or "neuron", or "engine_error") and, on
    neuron, what the runtime and compiler report: neuron_library, runtime_version, instance_family,
    instance_size_code, total_cores, visible_cores, neuronx_cc, compiler_version, and with_memory
    hbm_bytes_per_core (a runtime session is opened for it, claiming the cores for the moment);
    a `<what>_error` key says why one is missing."""
    return json.loads(_text("PjrtNeuron_EngineReport", 1 if with_memory else 0)[1])
