"""Event: PJRT_Event (ready, await, error, on-ready callbacks)."""

from __future__ import annotations

import ctypes

from pjrt_neuron.pjrt_capi.errors import PjrtError
from pjrt_neuron.pjrt_capi.handles import _Owned


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
