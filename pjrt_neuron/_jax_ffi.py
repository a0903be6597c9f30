"""jax.ffi on NeuronCores: `jax.ffi.register_ffi_target(name, capsule, platform="neuron")` reaches
the plugin's FFI extension (PJRT_FFI_Register_Handler), which hands the handler to the simulator's
engine build. JAX queues such registrations until a plugin installs a handler for its platform;
`install()` does, so registrations made before and after JAX initialises the plugin both arrive.
"""

from __future__ import annotations

import ctypes

from pjrt_neuron import config

_EXTENSION_TYPE_FFI = 5  # PJRT_Extension_Type_FFI in pjrt_c_api.h


class _ExtensionBase(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("type", ctypes.c_int), ("next", ctypes.c_void_p)]


class _FfiExtension(ctypes.Structure):
    _fields_ = [("base", _ExtensionBase), ("type_id_register", ctypes.c_void_p),
                ("user_data_add", ctypes.c_void_p), ("register_handler", ctypes.c_void_p)]


class _RegisterHandlerArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("target_name", ctypes.c_char_p),
                ("target_name_size", ctypes.c_size_t), ("handler", ctypes.c_void_p),
                ("platform_name", ctypes.c_char_p), ("platform_name_size", ctypes.c_size_t),
                ("traits", ctypes.c_uint32)]


def _capsule_pointer(capsule) -> int:
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule))


def register_handler(name: str, fn, platform: str = "neuron", api_version: int = 1, traits: int = 0) -> None:
    """Registers a typed XLA FFI handler (a PyCapsule, or {"execute": capsule}) with the plugin."""
    if api_version != 1:
        raise ValueError(f"jax.ffi target {name!r}: NeuronCores run typed FFI handlers only (api_version=1), "
                         f"not api_version={api_version}")
    if isinstance(fn, dict):
        stages = set(fn) - {"execute"}
        if stages:
            raise ValueError(f"jax.ffi target {name!r}: only the 'execute' stage is forwarded to NeuronCores, "
                             f"not {sorted(stages)}")
        fn = fn["execute"]
    from pjrt_neuron import pjrt_capi

    api = pjrt_capi.Api(config.library_path(), initialize=False)
    extension = api.raw.extension_start
    while extension:
        base = _ExtensionBase.from_address(extension)
        if base.type == _EXTENSION_TYPE_FFI:
            break
        extension = base.next
    if not extension:
        raise RuntimeError("pjrt-neuron: this plugin build offers no FFI extension")
    ffi = _FfiExtension.from_address(extension)
    call = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_RegisterHandlerArgs))(ffi.register_handler)
    encoded, platform_bytes = name.encode(), platform.encode()
    args = _RegisterHandlerArgs(ctypes.sizeof(_RegisterHandlerArgs), encoded, len(encoded), _capsule_pointer(fn),
                                platform_bytes, len(platform_bytes), int(traits))
    error = call(ctypes.byref(args))
    if error:
        raise api.error_from_ptr(error, "PJRT_FFI_Register_Handler")


def install() -> bool:
    """Has JAX hand `platform="neuron"` FFI registrations to the plugin; False where JAX cannot."""
    try:
        from jax._src.lib import xla_client
    except ImportError:
        return False
    handler = getattr(xla_client, "register_custom_call_handler", None)
    if handler is None:
        return False

    def _register(name, fn, xla_platform_name, api_version, traits):
        register_handler(name, fn, xla_platform_name, api_version, int(traits))

    try:
        handler("neuron", _register)  # also replays the registrations JAX queued before this
    except Exception as error:  # noqa: BLE001 - a bad queued registration must not stop JAX
        import warnings

        warnings.warn(f"pjrt-neuron: a jax.ffi registration for platform 'neuron' was refused: {error}", stacklevel=2)
    return True
