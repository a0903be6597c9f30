"""What every object of the Pythonic layer is: a C pointer and its Api; owned ones are destroyed
explicitly, or by their client's close()."""

from __future__ import annotations

import ctypes
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pjrt_neuron.pjrt_capi.api import Api
    from pjrt_neuron.pjrt_capi.client import Client


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
