"""PJRT C API: bulk uploads through PJRT_Client_CreateBuffersForAsyncHostToDevice and the
PJRT_AsyncHostToDeviceTransferManager entries (the path clients such as ZML use).

Uploaded buffers are compared bit for bit with the data and with the same upload through the
stock XLA CPU plugin; HBM accounting and the errors are checked by code and message.
"""

import ctypes

import numpy as np
import pytest

import pjrt_capi as P
from assertions import pjrt_error

INVALID = P.ErrorCode.INVALID_ARGUMENT
GIB = 1 << 30

ARRAYS = [np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5,
          np.array([3, -1, 4, 1, -5], np.int32),
          np.linspace(-2, 2, 10).astype(np.float16).reshape(2, 5)]


class Manager:
    """A transfer manager made through raw C API calls."""

    def __init__(self, api, client, arrays_or_shapes, memory=None):
        self.api, self.client = api, client
        self.keep = []
        specs = (P.STRUCTS["PJRT_ShapeSpec"] * len(arrays_or_shapes))()
        for spec, a in zip(specs, arrays_or_shapes):
            shape, dtype = (a.shape, a.dtype) if isinstance(a, np.ndarray) else a
            dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            self.keep.append(dims)
            spec.struct_size = ctypes.sizeof(spec)
            spec.dims = ctypes.addressof(dims)
            spec.num_dims = len(shape)
            spec.element_type = P.dtype_to_buffer_type(np.dtype(dtype))
        self.keep.append(specs)
        memory = memory if memory is not None else client.devices()[0].default_memory
        self.ptr = api.call("PJRT_Client_CreateBuffersForAsyncHostToDevice", client=client.ptr,
                            shape_specs=ctypes.addressof(specs), num_shape_specs=len(arrays_or_shapes),
                            memory=memory.ptr).transfer_manager

    def call(self, fn, **fields):
        return self.api.call("PJRT_AsyncHostToDeviceTransferManager_" + fn, transfer_manager=self.ptr, **fields)

    def transfer(self, index, data: bytes, offset, last):
        blob = ctypes.create_string_buffer(data, len(data))
        done = self.call("TransferData", buffer_index=index, data=ctypes.addressof(blob), offset=offset,
                         transfer_size=len(data), is_last_transfer=last).done_with_h2d_transfer
        event = P.Event(self.api, done, self.client)
        event.await_()
        event.destroy()

    def upload(self, index, array, chunks=3):
        raw = np.ascontiguousarray(array).tobytes()
        step = max(1, -(-len(raw) // chunks))
        for start in range(0, len(raw), step):
            self.transfer(index, raw[start:start + step], start, start + step >= len(raw))

    def retrieve(self, index):
        return P.Buffer(self.client, self.call("RetrieveBuffer", buffer_index=index).buffer_out)

    def destroy(self):
        self.call("Destroy")


def _bulk_upload(api, client):
    m = Manager(api, client, ARRAYS)
    assert m.call("BufferCount").buffer_count == len(ARRAYS)
    sizes = [m.call("BufferSize", buffer_index=i).buffer_size for i in range(len(ARRAYS))]
    # Retrieved before the data arrive, as clients do: ready once the last chunk is in.
    buffers = [m.retrieve(i) for i in range(len(ARRAYS))]
    for i, a in enumerate(ARRAYS):
        m.upload(i, a)
    out = [b.to_numpy() for b in buffers]
    device = m.call("Device").device_out
    m.destroy()
    return out, sizes, device, buffers


def test_bulk_upload_in_chunks_matches_data_and_stock_cpu_plugin(plugin_api, cpu_api, client, cpu_client):
    got, sizes, device, _ = _bulk_upload(plugin_api, client)
    want, cpu_sizes, _, _ = _bulk_upload(cpu_api, cpu_client)
    assert sizes == cpu_sizes == [a.nbytes for a in ARRAYS]
    assert device == client.devices()[0].ptr
    for g, w, a in zip(got, want, ARRAYS):
        assert g.dtype == w.dtype == a.dtype and g.shape == w.shape == a.shape
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))
        np.testing.assert_array_equal(g, a)


def test_upload_to_second_core_lands_there(plugin_api, client):
    d1 = client.devices()[1]
    m = Manager(plugin_api, client, ARRAYS[:1], memory=d1.default_memory)
    assert m.call("Device").device_out == d1.ptr
    m.upload(0, ARRAYS[0], chunks=1)
    b = m.retrieve(0)
    assert b.device.id == 1
    np.testing.assert_array_equal(b.to_numpy(), ARRAYS[0])
    m.destroy()


def test_hbm_is_charged_at_creation_and_moves_to_retrieved_buffers(plugin_api, client):
    d0 = client.devices()[0]
    used = lambda: d0.memory_stats()["bytes_in_use"]
    before = used()
    m = Manager(plugin_api, client, ARRAYS)
    total = sum(a.nbytes for a in ARRAYS)
    assert used() == before + total
    m.upload(0, ARRAYS[0])
    b = m.retrieve(0)
    m.destroy()  # the two buffers never retrieved are given back; the retrieved one stays
    assert used() == before + ARRAYS[0].nbytes
    b.destroy()
    assert used() == before


def test_pinned_host_buffers_are_not_charged_to_hbm(plugin_api, client):
    d0 = client.devices()[0]
    pinned = [m for m in d0.addressable_memories if m.kind == "pinned_host"][0]
    before = d0.memory_stats()["bytes_in_use"]
    m = Manager(plugin_api, client, ARRAYS[:1], memory=pinned)
    assert d0.memory_stats()["bytes_in_use"] == before
    m.upload(0, ARRAYS[0])
    b = m.retrieve(0)
    assert b.memory.kind == "pinned_host"
    np.testing.assert_array_equal(b.to_numpy(), ARRAYS[0])
    m.destroy()


def test_too_big_for_hbm_is_resource_exhausted_before_allocating(plugin_api, client):
    with pjrt_error(P.ErrorCode.RESOURCE_EXHAUSTED, "PJRT_Client_CreateBuffersForAsyncHostToDevice"):
        Manager(plugin_api, client, [((5, GIB), np.float32)])
    assert client.devices()[0].memory_stats()["bytes_in_use"] == 0


def test_transfer_past_the_end_is_invalid_argument(plugin_api, client):
    m = Manager(plugin_api, client, ARRAYS[:1])
    with pjrt_error(INVALID, "PJRT_AsyncHostToDeviceTransferManager_TransferData", "overruns buffer 0 of 96 bytes"):
        m.transfer(0, b"\0" * 8, 92, True)
    with pjrt_error(INVALID, "PJRT_AsyncHostToDeviceTransferManager_TransferData", "overruns"):
        m.transfer(0, b"\0" * 100, 0, True)
    m.destroy()


@pytest.mark.parametrize("fn", ["TransferData", "RetrieveBuffer", "BufferSize", "SetBufferError"])
@pytest.mark.parametrize("index", [-1, 1])
def test_buffer_index_out_of_range_is_invalid_argument(plugin_api, client, fn, index):
    m = Manager(plugin_api, client, ARRAYS[:1])
    extra = {"error_code": P.ErrorCode.INTERNAL} if fn == "SetBufferError" else {}
    with pjrt_error(INVALID, f"PJRT_AsyncHostToDeviceTransferManager_{fn}",
                    f"buffer_index {index} is out of range; the manager has 1 buffer(s)"):
        m.call(fn, buffer_index=index, **extra)
    m.destroy()


def test_second_retrieve_is_failed_precondition(plugin_api, client):
    m = Manager(plugin_api, client, ARRAYS[:1])
    m.retrieve(0)
    with pjrt_error(P.ErrorCode.FAILED_PRECONDITION, "PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer",
                    "buffer 0 was already retrieved"):
        m.retrieve(0)
    m.destroy()


def test_buffer_marked_failed_carries_the_error(plugin_api, client):
    m = Manager(plugin_api, client, ARRAYS[:2])
    failed, good = m.retrieve(0), m.retrieve(1)
    message = b"upload source went away"
    m.call("SetBufferError", buffer_index=0, error_code=P.ErrorCode.DATA_LOSS,
           error_message=ctypes.c_char_p(message), error_message_size=len(message))
    m.upload(1, ARRAYS[1])
    event = failed.ready_event()
    with pjrt_error(P.ErrorCode.DATA_LOSS, "upload source went away"):
        event.await_()
    with pjrt_error(P.ErrorCode.DATA_LOSS, "upload source went away"):
        failed.to_numpy()
    np.testing.assert_array_equal(good.to_numpy(), ARRAYS[1])
    m.destroy()


def test_null_memory_and_null_manager_are_invalid_argument(plugin_api, client):
    with pjrt_error(INVALID, "PJRT_Client_CreateBuffersForAsyncHostToDevice", "`memory` is null"):
        plugin_api.call("PJRT_Client_CreateBuffersForAsyncHostToDevice", client=client.ptr, memory=None)
    with pjrt_error(INVALID, "PJRT_AsyncHostToDeviceTransferManager_BufferCount", "`transfer_manager` is null"):
        plugin_api.call("PJRT_AsyncHostToDeviceTransferManager_BufferCount", transfer_manager=None)
    # Destroying null is allowed.
    plugin_api.call("PJRT_AsyncHostToDeviceTransferManager_Destroy", transfer_manager=None)


def test_add_metadata_is_accepted(plugin_api, client):
    m = Manager(plugin_api, client, ARRAYS[:1])
    m.call("AddMetadata", transfer_metadata=None, num_metadata=0)
    m.destroy()
