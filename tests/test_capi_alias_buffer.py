"""PJRT C API: alias buffers (PJRT_Client_CreateAliasBuffer / PJRT_Client_FulfillAliasBuffer),
a buffer whose contents another buffer supplies later. The same sequence runs on the stock XLA
CPU plugin, and the values and errors must agree; the plugin's own checks are tested by code and
message."""

import ctypes

import numpy as np
import pytest

import pjrt_capi as P
from assertions import pjrt_error

X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def _create(api, client, memory, shape=X.shape, dtype=X.dtype):
    dims = (ctypes.c_int64 * len(shape))(*shape)
    args = api.call("PJRT_Client_CreateAliasBuffer", client=client.ptr, memory=memory.ptr,
                    shape_dims=ctypes.addressof(dims), shape_num_dims=len(shape),
                    shape_element_type=P.dtype_to_buffer_type(np.dtype(dtype)))
    return P.Buffer(client, args.alias_buffer), args.fulfill_alias_buffer_cb


def _fulfill(api, client, fulfill, buffer=None, code=P.ErrorCode.OK, message=b""):
    api.call("PJRT_Client_FulfillAliasBuffer", client=client.ptr, buffer=buffer.ptr if buffer is not None else None,
             status_code=code, error_message=ctypes.c_char_p(message) if message else None,
             error_message_size=len(message), fulfill_alias_buffer_cb=fulfill)


def _fulfilled_and_failed(api, client):
    """(the values an alias shows once fulfilled, the error code and message a failed one gives)."""
    memory = client.devices()[0].default_memory
    alias, fulfill = _create(api, client, memory)
    target = client.buffer_from_numpy(X)
    _fulfill(api, client, fulfill, target)
    alias.ready_event().await_()
    values = alias.to_numpy()
    failed, fulfill_failed = _create(api, client, memory)
    # The stock plugin hands the error back to the caller too, once it has failed the alias.
    with pytest.raises(P.PjrtError) as handed_back:
        _fulfill(api, client, fulfill_failed, code=P.ErrorCode.DATA_LOSS, message=b"the producer went away")
    assert handed_back.value.code == P.ErrorCode.DATA_LOSS
    with pytest.raises(P.PjrtError) as raised:
        failed.to_numpy()
    return values, raised.value.code, raised.value.message


def test_alias_buffers_behave_as_on_the_stock_cpu_plugin(plugin_api, cpu_api, client, cpu_client):
    ours = _fulfilled_and_failed(plugin_api, client)
    stock = _fulfilled_and_failed(cpu_api, cpu_client)
    np.testing.assert_array_equal(ours[0], X)
    np.testing.assert_array_equal(stock[0], X)
    assert ours[1] == stock[1] == P.ErrorCode.DATA_LOSS
    assert "the producer went away" in ours[2] and "the producer went away" in stock[2]


def test_an_alias_charges_no_hbm_and_a_handle_is_used_once(plugin_api, client):
    device = client.devices()[0]
    before = device.memory_stats()["bytes_in_use"]
    alias, fulfill = _create(plugin_api, client, device.default_memory)
    assert device.memory_stats()["bytes_in_use"] == before
    target = client.buffer_from_numpy(X)
    _fulfill(plugin_api, client, fulfill, target)
    np.testing.assert_array_equal(alias.to_numpy(), X)
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Client_FulfillAliasBuffer", "used already"):
        _fulfill(plugin_api, client, fulfill, target)
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Client_FulfillAliasBuffer", "not handed out"):
        _fulfill(plugin_api, client, ctypes.c_void_p(0x1234).value, target)


def test_alias_buffer_arguments_are_checked(plugin_api, client):
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Client_CreateAliasBuffer", "`memory` is null"):
        plugin_api.call("PJRT_Client_CreateAliasBuffer", client=client.ptr, memory=None)
    _, fulfill = _create(plugin_api, client, client.devices()[0].default_memory)
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Client_FulfillAliasBuffer", "`buffer` is null"):
        _fulfill(plugin_api, client, fulfill)
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Client_FulfillAliasBuffer", "`fulfill_alias_buffer_cb` is null"):
        _fulfill(plugin_api, client, None, client.buffer_from_numpy(X))
    with pjrt_error(P.ErrorCode.CANCELLED, "not needed"):
        _fulfill(plugin_api, client, fulfill, code=P.ErrorCode.CANCELLED, message=b"not needed")
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Client_FulfillAliasBuffer", "used already"):
        _fulfill(plugin_api, client, fulfill, code=P.ErrorCode.CANCELLED, message=b"again")
