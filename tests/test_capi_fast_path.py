"""The short per-call path (benchmarks/bench_capi_overhead.py) still does everything it must.

Executions write their outputs in place, charge HBM once per core, give outputs the
execution's completion as their ready event, and downloads of ready dense buffers are copied
straight from simulated HBM. Each is checked against the stock CPU plugin or the device model.
"""

from __future__ import annotations

import ctypes
import threading

import ml_dtypes
import numpy as np
import pytest

import pjrt_capi as P
from assertions import pjrt_error
from programs import DOUBLE

DTYPES = [(np.float32, "f32"), (np.float64, "f64"), (ml_dtypes.bfloat16, "bf16"), (np.int8, "i8"),
          (np.uint16, "ui16"), (np.int64, "i64"), (np.bool_, "i1"), (np.complex64, "complex<f32>")]


def _reverse_program(mlir_type: str, shape=(2, 3, 4)) -> str:
    t = f"tensor<{'x'.join(map(str, shape))}x{mlir_type}>"
    return (f"func.func @main(%a: {t}) -> ({t}, {t}) {{\n"
            f"  %r = stablehlo.reverse %a, dims = [1] : {t}\n"
            f"  return %r, %a : {t}, {t}\n}}")


def _sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True).reshape(shape)
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype).reshape(shape)
    return (rng.standard_normal(n) * 4).astype(dtype).reshape(shape)


@pytest.mark.parametrize("dtype,mlir_type", DTYPES)
def test_outputs_and_uploads_read_back_bit_exact_as_on_the_cpu_plugin(client, cpu_client, dtype, mlir_type):
    x = _sample(dtype, (2, 3, 4))
    results = []
    for c in (client, cpu_client):
        exe = c.compile(_reverse_program(mlir_type))
        arg = c.buffer_from_numpy(x)
        reversed_, passed = exe.execute([arg])[0]
        results.append((arg.to_numpy(), reversed_.to_numpy(), passed.to_numpy()))
    for ours, stock in zip(results[0], results[1]):
        assert ours.dtype == stock.dtype and ours.shape == stock.shape
        np.testing.assert_array_equal(ours.view(np.uint8), stock.view(np.uint8))
    np.testing.assert_array_equal(results[0][1], np.flip(x, axis=1))


def _to_host_with_layout(buffer, minor_to_major):
    """PJRT_Buffer_ToHostBuffer with a host layout (a tiled layout without tiles)."""
    layout = P.STRUCTS["PJRT_Buffer_MemoryLayout"]()
    layout.struct_size = ctypes.sizeof(layout)
    layout.type = P.MemoryLayoutType.Tiled
    order = (ctypes.c_int64 * len(minor_to_major))(*minor_to_major)
    layout.tiled.struct_size = ctypes.sizeof(layout.tiled)
    layout.tiled.minor_to_major = ctypes.addressof(order)
    layout.tiled.minor_to_major_size = len(minor_to_major)
    out = np.empty(buffer.dims, buffer.dtype)
    a = buffer.api.call("PJRT_Buffer_ToHostBuffer", src=buffer.ptr, host_layout=ctypes.pointer(layout),
                        dst=out.ctypes.data, dst_size=out.nbytes)
    if a.event:
        event = P.Event(buffer.api, a.event, buffer.client)
        event.await_()
        event.destroy()
    return out.tobytes()


@pytest.mark.parametrize("shape, minor_to_major", [
    ((3, 5), (1, 0)), ((3, 5), (0, 1)), ((2, 3, 4), (1, 2, 0)), ((2, 3, 4), (0, 1, 2)),
])
def test_a_download_in_a_host_layout_gives_the_bytes_of_that_layout(client, shape, minor_to_major):
    # xla-cpu-pjrt ignores a permuted host layout (row-major bytes, silently); the plugin must not.
    x = _sample(np.float32, shape, seed=1)
    program = _reverse_program("f32", shape) if len(shape) == 3 else \
        DOUBLE.replace("2x3", "3x5")
    expected = np.flip(x, axis=1) if len(shape) == 3 else 2 * x
    ours = _to_host_with_layout(client.compile(program).execute([client.buffer_from_numpy(x)])[0][0],
                                minor_to_major)
    major_first = tuple(reversed(minor_to_major))
    assert ours == np.ascontiguousarray(expected.transpose(major_first)).tobytes()


def test_a_deleted_buffer_is_not_read_from_memory(client):
    b = client.buffer_from_numpy(np.ones((2, 3), np.float32))
    b.delete()
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Buffer_ToHostBuffer", "deleted or donated"):
        b.to_numpy()


def test_outputs_ready_events_outlive_the_buffer_and_the_completion(client):
    exe = client.compile(_reverse_program("f32"))
    x = _sample(np.float32, (2, 3, 4))
    outputs, done = exe.execute_async([client.buffer_from_numpy(x)])
    events = [b.ready_event() for b in outputs[0]]
    expected = [np.flip(x, axis=1), x]
    got = [b.to_numpy() for b in outputs[0]]
    for b in outputs[0]:
        b.destroy()
    done[0].destroy()  # the events share the execution's completion: it must stay alive for them
    fired = []
    seen = threading.Event()
    for event in events:
        event.await_()
        assert event.is_ready and event.error() is None
        event.on_ready(lambda error: (fired.append(error), seen.set()))
    assert seen.wait(10) and fired == [None, None]
    for event in events:
        event.destroy()
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


def test_outputs_are_charged_to_hbm_one_allocation_each_and_released(client):
    device = client.addressable_devices()[0]
    exe = client.compile(_reverse_program("f32", shape=(16, 16, 16)))
    arg = client.buffer_from_numpy(_sample(np.float32, (16, 16, 16)))
    before = device.memory_stats()
    outputs = exe.execute([arg])[0]
    during = device.memory_stats()
    assert during["bytes_in_use"] - before["bytes_in_use"] == 2 * 16 * 16 * 16 * 4
    assert during["num_allocs"] - before["num_allocs"] == 2
    assert during["largest_alloc_size"] >= 16 * 16 * 16 * 4
    for b in outputs:
        b.destroy()
    assert device.memory_stats()["bytes_in_use"] == before["bytes_in_use"]


def test_many_executions_from_several_threads_keep_values_and_hbm_exact(client):
    device = client.addressable_devices()[0]
    exe = client.compile(DOUBLE)
    before = device.memory_stats()["bytes_in_use"]
    errors = []

    def worker(seed):
        try:
            for i in range(200):
                x = np.full((2, 3), seed * 1000 + i, np.float32)
                [out] = exe.execute([client.buffer_from_numpy(x)])[0]
                np.testing.assert_array_equal(out.to_numpy(), 2 * x)
                out.destroy()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert device.memory_stats()["bytes_in_use"] == before


def test_a_stale_argument_in_a_long_list_is_named_by_its_index(client):
    n = 40
    params = ", ".join(f"%a{i}: tensor<2xf32>" for i in range(n))
    results = ", ".join(["tensor<2xf32>"] * n)
    body = "\n".join(f"  %r{i} = stablehlo.add %a{i}, %a{i} : tensor<2xf32>" for i in range(n))
    program = (f"func.func @main({params}) -> ({results}) {{\n{body}\n"
               f"  return {', '.join(f'%r{i}' for i in range(n))} : {results}\n}}")
    exe = client.compile(program)
    args = [client.buffer_from_numpy(np.full(2, i, np.float32)) for i in range(n)]
    stale = args[27].detach()
    P.Buffer(client, stale).destroy()  # destroyed behind the list's back
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_LoadedExecutable_Execute", "argument 27 is not a live buffer"):
        exe.execute([*args[:27], P.Buffer(client, stale), *args[28:]])
