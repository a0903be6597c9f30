"""PjrtError: a PJRT_Error's code, message and the function that returned it."""

from __future__ import annotations

from pjrt_neuron.pjrt_capi.header import ErrorCode


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
