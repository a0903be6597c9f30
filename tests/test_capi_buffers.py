"""PJRT C API: buffers on simulated NeuronCores (host transfers, events, copies)."""

import ctypes
import threading
import time

import ml_dtypes
import numpy as np
import pytest

import pjrt_capi as P
from assertions import pjrt_error

INVALID = P.ErrorCode.INVALID_ARGUMENT
Semantics = P.HostBufferSemantics
GIB = 1 << 30




# (numpy dtype, PJRT element type) for every byte-sized type XLA has.
_BASE_TYPES = [
    (np.bool_, "PRED"), (np.int8, "S8"), (np.int16, "S16"), (np.int32, "S32"),
    (np.int64, "S64"), (np.uint8, "U8"), (np.uint16, "U16"), (np.uint32, "U32"),
    (np.uint64, "U64"), (np.float16, "F16"), (ml_dtypes.bfloat16, "BF16"),
    (np.float32, "F32"), (np.float64, "F64"), (np.complex64, "C64"),
    (np.complex128, "C128"),
]
_FP8_TYPES = [
    ("float8_e5m2", "F8E5M2"), ("float8_e4m3fn", "F8E4M3FN"),
    ("float8_e4m3b11fnuz", "F8E4M3B11FNUZ"), ("float8_e5m2fnuz", "F8E5M2FNUZ"),
    ("float8_e4m3fnuz", "F8E4M3FNUZ"), ("float8_e4m3", "F8E4M3"),
    ("float8_e3m4", "F8E3M4"), ("float8_e8m0fnu", "F8E8M0FNU"),
]
ELEMENT_TYPES = _BASE_TYPES + [
    (getattr(ml_dtypes, name), pjrt) for name, pjrt in _FP8_TYPES
    if hasattr(ml_dtypes, name) and pjrt in P.BufferType.__members__
]


def _sample(dtype, shape, seed=0):
    """Distinct, representable values of `dtype` (incl. negatives where they exist)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True).reshape(shape)
    if dtype.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype).reshape(shape)
    return (rng.standard_normal(n) * 4).astype(dtype).reshape(shape)


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.ascontiguousarray(a).view(np.uint8),
                                  np.ascontiguousarray(b).view(np.uint8))


def _wait_ready(event, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not event.is_ready:
        assert time.monotonic() < deadline, "event never became ready"
        time.sleep(0.002)


def _raw_from_host(client, arr, semantics, device=None):
    """BufferFromHostBuffer by hand: returns (Buffer, done Event or None)."""
    dims = (ctypes.c_int64 * arr.ndim)(*arr.shape)
    a = client._call("PJRT_Client_BufferFromHostBuffer", data=arr.ctypes.data,
                     type=P.dtype_to_buffer_type(arr.dtype), dims=dims, num_dims=arr.ndim,
                     host_buffer_semantics=int(semantics),
                     device=device or client.devices()[0])
    done = P.Event(client.api, a.done_with_host_buffer, client) if a.done_with_host_buffer else None
    return P.Buffer(client, a.buffer), done


# --------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, pjrt_type", ELEMENT_TYPES,
                         ids=[np.dtype(t).name for t, _ in ELEMENT_TYPES])
def test_buffer_round_trip(client, dtype, pjrt_type):
    x = _sample(dtype, (3, 5))
    buf = client.buffer_from_numpy(x)
    assert buf.element_type == P.BufferType[pjrt_type]
    assert buf.dims == (3, 5)
    assert buf.unpadded_dims == (3, 5)
    assert buf.on_device_size == x.nbytes
    assert buf.host_size() == x.nbytes
    _same_bits(buf.to_numpy(), x)


@pytest.mark.parametrize("shape", [(), (0,), (4, 0, 3)], ids=["0d", "empty", "empty3d"])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.bool_, np.complex128],
                         ids=["f32", "bf16", "pred", "c128"])
def test_buffer_round_trip_scalar_and_empty_shapes(client, shape, dtype):
    x = _sample(dtype, shape)
    buf = client.buffer_from_numpy(x)
    assert buf.dims == shape
    assert buf.on_device_size == x.nbytes
    _same_bits(buf.to_numpy(), x)


def test_buffer_round_trip_on_second_core(client):
    x = _sample(np.int64, (7,))
    d1 = client.devices()[1]
    buf = client.buffer_from_numpy(x, device=d1)
    assert buf.device.id == 1
    assert buf.memory.ptr == d1.default_memory.ptr
    _same_bits(buf.to_numpy(), x)


def test_buffer_from_transposed_view_with_byte_strides(client):
    base = np.arange(12, dtype=np.int32).reshape(3, 4)
    view = base.T  # (4, 3), strides (4, 16): column-major walk of `base`
    assert not view.flags.c_contiguous
    buf = client.buffer_from_numpy(view, byte_strides=view.strides)
    assert buf.dims == (4, 3)
    np.testing.assert_array_equal(buf.to_numpy(), view)


def test_buffer_from_strided_slice_with_byte_strides(client):
    base = _sample(np.float64, (5, 8))
    view = base[::2, 1::3]  # gaps in both dimensions
    buf = client.buffer_from_numpy(view, byte_strides=view.strides)
    assert buf.dims == view.shape
    np.testing.assert_array_equal(buf.to_numpy(), view)


# --------------------------------------------------------------------------
# Host buffer semantics and the done_with_host_buffer event
# --------------------------------------------------------------------------

@pytest.mark.parametrize("semantics", [Semantics.kImmutableOnlyDuringCall,
                                       Semantics.kImmutableUntilTransferCompletes])
def test_copying_semantics_release_the_host_buffer(client, semantics):
    x = _sample(np.float32, (64,))
    host = x.copy()
    buf, done = _raw_from_host(client, host, semantics)
    if done is not None:
        done.await_()  # no error
        assert done.is_ready
        done.destroy()
    host[:] = -1  # the host memory is ours again: the device copy must not change
    np.testing.assert_array_equal(buf.to_numpy(), x)


def test_only_during_call_host_buffer_is_free_on_return(client):
    x = _sample(np.int16, (32,))
    host = x.copy()
    buf, done = _raw_from_host(client, host, Semantics.kImmutableOnlyDuringCall)
    host[:] = 0  # reused right away, before awaiting anything
    if done is not None:
        assert done.is_ready
        done.destroy()
    np.testing.assert_array_equal(buf.to_numpy(), x)


def test_zero_copy_done_event_fires_once_the_buffer_is_gone(client):
    host = _sample(np.float32, (256,))
    buf, done = _raw_from_host(client, host, Semantics.kImmutableZeroCopy)
    np.testing.assert_array_equal(buf.to_numpy(), host)
    assert done is not None
    buf.destroy()  # the runtime may hold `host` until here, never longer
    _wait_ready(done)
    assert done.error() is None
    done.destroy()


# --------------------------------------------------------------------------
# Events: to-host transfers and readiness
# --------------------------------------------------------------------------

def test_to_host_async_event_await_and_on_ready(plugin_api, client):
    x = _sample(np.float64, (4, 4))
    buf = client.buffer_from_numpy(x)
    out = np.zeros_like(x)
    a = plugin_api.call("PJRT_Buffer_ToHostBuffer", src=buf, dst=out, dst_size=out.nbytes)
    assert a.event
    event = P.Event(plugin_api, a.event, client)
    fired = threading.Event()
    results = []

    def callback(error):
        results.append(error)
        fired.set()

    event.on_ready(callback)
    event.await_()
    assert event.is_ready
    assert fired.wait(10)
    assert results == [None]
    assert event.error() is None
    np.testing.assert_array_equal(out, x)
    event.destroy()


def test_to_host_size_query_with_null_dst(plugin_api, client):
    x = _sample(np.complex64, (3, 2))
    buf = client.buffer_from_numpy(x)
    a = plugin_api.call("PJRT_Buffer_ToHostBuffer", src=buf, dst=None, dst_size=0)
    assert a.dst_size == x.nbytes
    assert not a.event


def test_copy_raw_to_host_reads_a_byte_range(plugin_api, client):
    x = np.arange(6, dtype=np.float32)
    buf = client.buffer_from_numpy(x)
    out = np.zeros(2, np.float32)
    a = plugin_api.call("PJRT_Buffer_CopyRawToHost", buffer=buf, dst=out, offset=8,
                        transfer_size=8)
    event = P.Event(plugin_api, a.event, client)
    event.await_()
    event.destroy()
    np.testing.assert_array_equal(out, x[2:4])


def test_ready_event_becomes_ready_without_error(client):
    buf = client.buffer_from_numpy(_sample(np.uint8, (100,)))
    event = buf.ready_event()
    event.await_()
    assert event.is_ready
    results = []
    event.on_ready(results.append)
    _wait_ready(event)
    deadline = time.monotonic() + 10
    while not results and time.monotonic() < deadline:
        time.sleep(0.002)
    assert results == [None]
    event.destroy()


# --------------------------------------------------------------------------
# Delete, copies, placement
# --------------------------------------------------------------------------

def test_delete_marks_the_buffer_deleted_and_keeps_its_metadata(client):
    buf = client.buffer_from_numpy(_sample(np.int32, (2, 3)))
    assert not buf.is_deleted
    buf.delete()
    assert buf.is_deleted
    assert buf.element_type == P.BufferType.S32
    assert buf.dims == (2, 3)
    assert buf.device.id == 0
    buf.delete()  # deleting twice is harmless
    assert buf.is_deleted


def test_copy_to_the_other_core(client):
    x = _sample(ml_dtypes.bfloat16, (5, 3))
    d0, d1 = client.devices()
    src = client.buffer_from_numpy(x, device=d0)
    dst = src.copy_to_device(d1)
    assert dst.device.id == 1
    assert dst.memory.ptr == d1.default_memory.ptr
    assert dst.element_type == P.BufferType.BF16 and dst.dims == (5, 3)
    _same_bits(dst.to_numpy(), x)
    _same_bits(src.to_numpy(), x)  # the source is untouched


def test_copy_to_memory_of_the_other_core(client):
    x = _sample(np.int8, (9,))
    d1 = client.devices()[1]
    dst = client.buffer_from_numpy(x).copy_to_memory(d1.default_memory)
    assert dst.device.id == 1
    _same_bits(dst.to_numpy(), x)


def test_buffer_placed_by_memory_instead_of_device(client):
    x = _sample(np.float16, (6,))
    d1 = client.devices()[1]
    buf = client.buffer_from_numpy(x, memory=d1.default_memory)
    assert buf.device.ptr == d1.ptr
    assert buf.memory.ptr == d1.default_memory.ptr
    assert buf.memory.kind == "device"
    _same_bits(buf.to_numpy(), x)


def test_buffer_with_device_and_its_own_memory(client):
    d1 = client.devices()[1]
    buf = client.buffer_from_numpy(np.ones(3, np.float32), device=d1, memory=d1.default_memory)
    assert buf.device.id == 1


def test_buffer_with_device_and_another_cores_memory_is_refused(client):
    d0, d1 = client.devices()
    with pjrt_error(INVALID, "PJRT_Client_BufferFromHostBuffer", "memory", "device"):
        client.buffer_from_numpy(np.ones(3, np.float32), device=d0, memory=d1.default_memory)


def test_buffer_is_not_on_cpu(client):
    # Simulated or not, NeuronCore HBM is not host memory.
    assert client.buffer_from_numpy(np.ones(2, np.float32)).is_on_cpu is False


def test_uninitialized_buffer_has_shape_and_is_charged(client):
    d1 = client.devices()[1]
    dims = (ctypes.c_int64 * 2)(4, 8)
    a = client._call("PJRT_Client_CreateUninitializedBuffer", shape_dims=dims, shape_num_dims=2,
                     shape_element_type=P.BufferType.F64, device=d1)
    buf = P.Buffer(client, a.buffer)
    assert (buf.element_type, buf.dims, buf.device.id) == (P.BufferType.F64, (4, 8), 1)
    assert d1.memory_stats()["bytes_in_use"] == 256


def test_uninitialized_buffer_larger_than_core_hbm_is_resource_exhausted(client):
    # 16 GiB + 4 bytes on a core with 16 GiB HBM must not fit.  (Host memory is
    # never touched: the engine allocates lazily, and the plugin should refuse first.)
    d0 = client.devices()[0]
    limit = d0.memory_stats()["bytes_limit"]
    dims = (ctypes.c_int64 * 1)(limit // 4 + 1)
    try:
        a = client._call("PJRT_Client_CreateUninitializedBuffer", shape_dims=dims,
                         shape_num_dims=1, shape_element_type=P.BufferType.F32, device=d0)
    except P.PjrtError as err:
        assert err.code == P.ErrorCode.RESOURCE_EXHAUSTED, f"{err.code_name}: {err.message}"
        assert "PJRT_Client_CreateUninitializedBuffer" in err.message
        assert d0.memory_stats()["bytes_in_use"] == 0
        return
    buf = P.Buffer(client, a.buffer)
    in_use = d0.memory_stats()["bytes_in_use"]
    buf.destroy()
    pytest.fail(f"accepted a {limit + 4}-byte buffer: bytes_in_use {in_use} > bytes_limit {limit}")


def test_large_copies_to_host_write_only_their_destination(plugin_api, client):
    # Large copies pre-fault their destination's pages; bytes around it must stay untouched.
    x = np.arange(3 << 18, dtype=np.float32)  # 3 MiB
    buf = client.buffer_from_numpy(x)
    host = np.full(x.size + 2048, -1.0, np.float32)
    dst = host[1001:1001 + x.size]  # starts and ends inside pages shared with the sentinels
    a = plugin_api.call("PJRT_Buffer_ToHostBuffer", src=buf, dst=dst.ctypes.data, dst_size=dst.nbytes)
    if a.event:
        event = P.Event(plugin_api, a.event, client)
        event.await_()
        event.destroy()
    np.testing.assert_array_equal(dst, x)
    assert (host[:1001] == -1).all() and (host[1001 + x.size:] == -1).all()

    host[:] = -1
    raw = host[7:7 + x.size - 5]
    a = plugin_api.call("PJRT_Buffer_CopyRawToHost", buffer=buf, dst=raw.ctypes.data, offset=20,
                        transfer_size=raw.nbytes)
    if a.event:
        event = P.Event(plugin_api, a.event, client)
        event.await_()
        event.destroy()
    np.testing.assert_array_equal(raw, x[5:])
    assert (host[:7] == -1).all() and (host[7 + raw.size:] == -1).all()


@pytest.mark.parametrize("dtype", [np.float32, np.int8, ml_dtypes.bfloat16, np.complex128])
def test_large_uploads_hold_their_bytes_on_the_core(client, dtype):
    # Uploads of 4 MiB and more are copied by the plugin into memory of its own (not the
    # engine's allocator): same values, every byte charged to the core, released at destroy.
    d1 = client.devices()[1]
    before = d1.memory_stats()["bytes_in_use"]
    x = (np.arange((5 << 20) // np.dtype(dtype).itemsize) % 251).astype(dtype).reshape(5, -1)  # 5 MiB
    buf = client.buffer_from_numpy(x, device=d1)
    assert buf.device == d1 and buf.dims == x.shape and buf.dtype == np.dtype(dtype)
    assert d1.memory_stats()["bytes_in_use"] == before + x.nbytes
    np.testing.assert_array_equal(buf.to_numpy(), x)
    copy = buf.copy_to_device(client.devices()[0])
    np.testing.assert_array_equal(copy.to_numpy(), x)
    copy.destroy()
    buf.destroy()
    assert d1.memory_stats()["bytes_in_use"] == before


def test_large_strided_upload_and_donation(client):
    # A large non-dense view goes the engine's way; a large dense one is donated like any other.
    base = np.arange(3 << 19, dtype=np.float32).reshape(1024, -1)
    view = base[:, ::2]
    strided = client.buffer_from_numpy(view, byte_strides=view.strides)
    np.testing.assert_array_equal(strided.to_numpy(), view)
    dense = client.buffer_from_numpy(base)
    shape = "x".join(map(str, base.shape))
    executable = client.compile(f"""
func.func @main(%a: tensor<{shape}xf32> {{tf.aliasing_output = 0 : i32}}) -> tensor<{shape}xf32> {{
  %0 = stablehlo.add %a, %a : tensor<{shape}xf32>
  return %0 : tensor<{shape}xf32>
}}""")
    in_use = client.devices()[0].memory_stats()["bytes_in_use"]
    (out,) = executable.execute([dense])
    assert dense.is_deleted
    np.testing.assert_array_equal(out[0].to_numpy(), base + base)
    assert client.devices()[0].memory_stats()["bytes_in_use"] == in_use  # the output took the input's place
