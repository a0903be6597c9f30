"""Api: a loaded plugin's PJRT_Api table; builds argument structs, calls entries, turns a
returned PJRT_Error into a PjrtError."""

from __future__ import annotations

import ctypes
import enum
import os

from pjrt_neuron.pjrt_capi.client import Client
from pjrt_neuron.pjrt_capi.errors import PjrtError
from pjrt_neuron.pjrt_capi.header import API_FUNCTIONS, STRUCTS, ErrorCode, _field_names, cpu_plugin_path
from pjrt_neuron.pjrt_capi.values import _named_values_out, _string_at, _to_pointer


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
