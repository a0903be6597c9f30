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

Layouts were checked against gcc for API 0.81 (see ``layouts.py``).  Resources are freed by explicit ``destroy()`` /
``Client.close()``; ``__del__`` is only a leak guard.

Modules: ``header`` (the parse and the tables), ``layouts`` (checked against C), ``values``
(Python values to and from C), ``compile_options``, ``errors``, ``api``, and one per object:
``handles``, ``events``, ``devices`` (with memories), ``buffers``, ``executables``, ``client``.
"""

from pjrt_neuron.pjrt_capi.api import Api
from pjrt_neuron.pjrt_capi.buffers import Buffer
from pjrt_neuron.pjrt_capi.client import Client
from pjrt_neuron.pjrt_capi.compile_options import _pb_bytes, _pb_varint, _varint, compile_options_proto
from pjrt_neuron.pjrt_capi.devices import Device, Memory
from pjrt_neuron.pjrt_capi.errors import PjrtError
from pjrt_neuron.pjrt_capi.events import Event
from pjrt_neuron.pjrt_capi.executables import Executable, LoadedExecutable
from pjrt_neuron.pjrt_capi.header import (API_FUNCTIONS, CONSTANTS, ENUMS, HEADER_VERSION, STRUCT_SIZES, STRUCTS,
                                          BufferType, ErrorCode, HostBufferSemantics, MemoryLayoutType,
                                          NamedValueType, PJRT_Buffer_MemoryLayout_Type, PJRT_Buffer_Type,
                                          PJRT_Error_Code, PJRT_HostBufferSemantics, PJRT_NamedValue_Type,
                                          _field_names, cpu_plugin_path, header_path)
from pjrt_neuron.pjrt_capi.layouts import _self_check_layouts, check_layouts_with_cc
from pjrt_neuron.pjrt_capi.values import (_named_values_in, _named_values_out, _ptr_array, _string_at,
                                          buffer_type_to_dtype, dtype_to_buffer_type)

__all__ = [
    "Api", "Client", "Device", "Memory", "Buffer", "Event", "Executable",
    "LoadedExecutable", "PjrtError", "STRUCTS", "ENUMS", "CONSTANTS",
    "STRUCT_SIZES", "API_FUNCTIONS", "header_path", "cpu_plugin_path",
    "compile_options_proto", "dtype_to_buffer_type", "buffer_type_to_dtype",
    "check_layouts_with_cc",
]
# The enum aliases, HEADER_VERSION and the underscored helpers are imported here too: the C API
# tests read C values and check layouts with them.


def __getattr__(name):  # module-level: pjrt_capi.PJRT_Foo_Args / enums
    if name in STRUCTS:
        return STRUCTS[name]
    if name in ENUMS:
        return ENUMS[name]
    if name in CONSTANTS:
        return CONSTANTS[name]
    raise AttributeError(name)
