"""Assertions shared by the C API level tests."""

import contextlib

import pytest

import pjrt_capi as P


@contextlib.contextmanager
def pjrt_error(code, *fragments):
    """Expect a PjrtError with `code` whose message contains every fragment."""
    with pytest.raises(P.PjrtError) as info:
        yield info
    err = info.value
    assert err.code == code, f"got {err.code_name}: {err.message}"
    for fragment in fragments:
        assert fragment in err.message, f"{fragment!r} not in {err.message!r}"
