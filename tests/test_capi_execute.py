"""PJRT C API: compiling and executing on simulated NeuronCores.

Results are checked against numpy and, bit for bit, against the stock XLA CPU
plugin running the same program on the same inputs.
"""

import ctypes
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import pjrt_capi as P
import pjrt_neuron.config as config
from programs import ALL_REDUCE, DOUBLE, DONATING, PER_REPLICA
from assertions import pjrt_error

INVALID = P.ErrorCode.INVALID_ARGUMENT

# Several arguments, several outputs (a tuple result), mixed element types.
MULTI = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %k: tensor<i32>)
    -> (tensor<2x3xf32>, tensor<3x2xf32>, tensor<i32>) {
  %0 = stablehlo.multiply %a, %b : tensor<2x3xf32>
  %1 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %2 = stablehlo.add %k, %k : tensor<i32>
  return %0, %1, %2 : tensor<2x3xf32>, tensor<3x2xf32>, tensor<i32>
}"""




A = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
B = np.linspace(-1, 3, 6, dtype=np.float32).reshape(2, 3)
K = np.array(21, np.int32)






@pytest.fixture
def cpu_client(cpu_api):
    """The stock XLA CPU plugin with two devices, as reference."""
    c = P.Client(cpu_api, {"cpu_device_count": 2})
    yield c
    c.close()


def _run(client, code, inputs, fmt="mlir", **kwargs):
    executable = client.compile(code, fmt)
    buffers = [client.buffer_from_numpy(x) for x in inputs]
    (outputs,) = executable.execute(buffers, **kwargs)
    return [o.to_numpy() for o in outputs]


def _same_bits(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.atleast_1d(g).view(np.uint8), np.atleast_1d(w).view(np.uint8))


def _check_multi(outputs):
    np.testing.assert_array_equal(outputs[0], A * B)
    np.testing.assert_array_equal(outputs[1], A.T)
    assert outputs[2] == 42 and outputs[2].dtype == np.int32


def _raw_execute(api, executable, buffers, *, options=None, struct_size=None,
                 execute_device=None):
    """PJRT_LoadedExecutable_Execute on one device with hand-made args; returns
    (output Buffers, completion Event)."""
    client = executable.client
    n_out = executable.num_outputs
    args = (ctypes.c_void_p * max(len(buffers), 1))(*[b.ptr for b in buffers])
    arg_lists = (ctypes.c_void_p * 1)(ctypes.addressof(args))
    outs = (ctypes.c_void_p * n_out)()
    out_lists = (ctypes.c_void_p * 1)(ctypes.addressof(outs))
    events = (ctypes.c_void_p * 1)()
    api.call("PJRT_LoadedExecutable_Execute", struct_size=struct_size, executable=executable,
             options=options, argument_lists=arg_lists, num_devices=1, num_args=len(buffers),
             output_lists=out_lists, device_complete_events=events,
             execute_device=execute_device)
    event = P.Event(api, events[0], client) if events[0] else None
    return [P.Buffer(client, p) for p in outs], event


# --------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------

def test_multi_argument_multi_output_program_matches_numpy(client):
    _check_multi(_run(client, MULTI, [A, B, K]))


def test_multi_output_program_matches_stock_cpu_plugin(client, cpu_client):
    _same_bits(_run(client, MULTI, [A, B, K]), _run(cpu_client, MULTI, [A, B, K]))


def test_outputs_live_on_the_executing_core_and_are_charged(client):
    executable = client.compile(MULTI)
    inputs = [client.buffer_from_numpy(x) for x in (A, B, K)]
    (outputs,) = executable.execute(inputs)
    assert [o.device.id for o in outputs] == [0, 0, 0]
    assert [o.element_type for o in outputs] == [P.BufferType.F32, P.BufferType.F32,
                                                 P.BufferType.S32]
    # Inputs 24 + 24 + 4, outputs 24 + 24 + 4 bytes.
    assert client.devices()[0].memory_stats()["bytes_in_use"] == 104


def test_portable_executable_runs_on_device_1_via_execute_device(client, cpu_client):
    opts = P.compile_options_proto(compile_portable_executable=True)
    executable = client.compile(MULTI, compile_options=opts)
    d1 = client.devices()[1]
    buffers = [client.buffer_from_numpy(x, device=d1) for x in (A, B, K)]
    (outputs,) = executable.execute(buffers, execute_device=d1)
    assert [o.device.id for o in outputs] == [1, 1, 1]
    _check_multi([o.to_numpy() for o in outputs])
    assert client.devices()[0].memory_stats()["bytes_in_use"] == 0


def test_two_replicas_run_one_per_core(client):
    executable = client.compile(PER_REPLICA, compile_options=P.compile_options_proto(num_replicas=2))
    assert [d.id for d in executable.addressable_devices] == [0, 1]
    x = np.array([1.0, 2.0], np.float32)
    lists = [[client.buffer_from_numpy(x, device=d)] for d in client.devices()]
    results = executable.execute(lists)
    assert [row[0].device.id for row in results] == [0, 1]
    np.testing.assert_array_equal(results[0][0].to_numpy(), x)
    np.testing.assert_array_equal(results[1][0].to_numpy(), x + 1)


def test_async_execute_completion_event_and_ready_outputs(client):
    executable = client.compile(DOUBLE)
    outputs, events = executable.execute_async([client.buffer_from_numpy(A)])
    (event,) = events
    event.await_()
    assert event.is_ready and event.error() is None
    event.destroy()
    ready = outputs[0][0].ready_event()
    ready.await_()
    ready.destroy()
    np.testing.assert_array_equal(outputs[0][0].to_numpy(), A + A)


def test_a_ready_event_may_be_destroyed_inside_its_own_on_ready_callback(client):
    # JAX does this: the callback of a ready event runs inside PJRT_Event_OnReady and destroys
    # the event, so the plugin must read nothing of it afterwards (the sanitizer leg,
    # .ci/sanitize_check.sh, reported a heap-use-after-free here).
    executable = client.compile(DOUBLE)
    outputs, (event,) = executable.execute_async([client.buffer_from_numpy(A)])
    event.await_()
    seen = []

    def destroy_in_callback(error):
        seen.append(error)
        event.destroy()

    event.on_ready(destroy_in_callback)
    assert seen == [None] and event.ptr is None
    np.testing.assert_array_equal(outputs[0][0].to_numpy(), A + A)


# --------------------------------------------------------------------------
# Executable properties
# --------------------------------------------------------------------------

def test_executable_describes_its_outputs(client, cpu_client):
    loaded = client.compile(MULTI)
    with loaded.get_executable() as ex:
        assert ex.name == "main"
        assert ex.num_outputs == 3
        assert (ex.num_replicas, ex.num_partitions) == (1, 1)
        assert ex.output_element_types == [P.BufferType.F32, P.BufferType.F32, P.BufferType.S32]
        assert ex.output_dimensions == [(2, 3), (3, 2), ()]
        assert ex.output_memory_kinds == ["device", "device", "device"]
    assert [d.id for d in loaded.addressable_devices] == [0]


def test_fingerprint_is_non_empty_and_stable(client):
    first, second = client.compile(MULTI), client.compile(MULTI)
    other = client.compile(DOUBLE)
    with first.get_executable() as ex:
        fingerprint = ex.fingerprint
    assert fingerprint
    assert first.fingerprint == fingerprint  # loaded and unloaded views agree
    assert second.fingerprint == fingerprint
    assert other.fingerprint != fingerprint


def test_cost_analysis_reports_flops_like_the_engine(client, engine_client):
    with client.compile(MULTI).get_executable() as ex:
        costs = ex.cost_analysis()
    # 6 multiplies and one scalar add.
    assert costs["flops"] == 7.0
    stock_loaded = engine_client.compile(MULTI)  # the stock engine's executable dies with it
    with stock_loaded.get_executable() as stock:
        try:
            expected = stock.cost_analysis()
        except P.PjrtError as err:  # newer builds: the plugin counts from the optimized program
            assert err.code == P.ErrorCode.UNIMPLEMENTED, err
            assert costs == {"flops": 7.0, "transcendentals": 0.0, "bytes accessed": 2 * (24 + 24 + 4)}  # in, out
            return
        assert costs == expected


def test_compiled_memory_stats_match_the_engine(client, engine_client):
    with client.compile(MULTI).get_executable() as ex:
        stats = ex.compiled_memory_stats()
    assert stats["argument_size_in_bytes"] == 24 + 24 + 4
    stock_loaded = engine_client.compile(MULTI)
    with stock_loaded.get_executable() as stock:
        assert stats == stock.compiled_memory_stats()


def test_executable_outlives_its_loaded_executable(client):
    loaded = client.compile(DOUBLE)
    ex = loaded.get_executable()
    loaded.destroy()
    assert ex.name == "main"
    assert ex.serialize()
    ex.destroy()


# --------------------------------------------------------------------------
# Serialization
# --------------------------------------------------------------------------

def test_serialize_deserialize_and_load_gives_the_same_results(client):
    loaded = client.compile(MULTI)
    with loaded.get_executable() as ex:
        data = ex.serialize()
        fingerprint = ex.fingerprint
    assert data
    reloaded = client.deserialize_and_load(data)
    with reloaded.get_executable() as ex2:
        assert ex2.num_outputs == 3
        assert ex2.output_dimensions == [(2, 3), (3, 2), ()]
        assert ex2.fingerprint == fingerprint
    buffers = [client.buffer_from_numpy(x) for x in (A, B, K)]
    (fresh,) = loaded.execute(buffers)
    (again,) = reloaded.execute(buffers)
    _same_bits([o.to_numpy() for o in again], [o.to_numpy() for o in fresh])
    _check_multi([o.to_numpy() for o in again])


def test_deserialized_executable_loads_into_another_client(plugin_api, client):
    with client.compile(DOUBLE).get_executable() as ex:
        data = ex.serialize()
    with P.Client(plugin_api) as other:
        reloaded = other.deserialize_and_load(data)
        (out,) = reloaded.execute([other.buffer_from_numpy(A)])
        np.testing.assert_array_equal(out[0].to_numpy(), A + A)


# --------------------------------------------------------------------------
# HLO programs (serialized HloModuleProto from jax)
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hlo_proto():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    spec = jax.ShapeDtypeStruct((2, 3), np.float32)

    def f(a, b):
        return jnp.sin(a) * b + 1.0, (a @ b.T).sum()

    lowered = jax.jit(f).trace(spec, spec).lower(lowering_platforms=("cpu",))
    return lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()


def test_hlo_program_matches_numpy_and_stock_cpu_plugin(client, cpu_client, hlo_proto):
    got = _run(client, hlo_proto, [A, B], fmt="hlo")
    np.testing.assert_allclose(got[0], np.sin(A) * B + 1.0, rtol=1e-6)
    np.testing.assert_allclose(got[1], (A @ B.T).sum(), rtol=1e-5)
    _same_bits(got, _run(cpu_client, hlo_proto, [A, B], fmt="hlo"))


# --------------------------------------------------------------------------
# Donation
# --------------------------------------------------------------------------

def test_donated_input_is_deleted_after_execute(client):
    executable = client.compile(DONATING)
    x = client.buffer_from_numpy(A)
    (out,) = executable.execute([x])
    np.testing.assert_array_equal(out[0].to_numpy(), A + A)
    assert x.is_deleted
    # Only the output is left on the core.
    assert client.devices()[0].memory_stats()["bytes_in_use"] == 24


def test_non_donatable_input_stays_alive(client):
    executable = client.compile(DONATING)
    x = client.buffer_from_numpy(A)
    (out,) = executable.execute([x], non_donatable=[0])
    np.testing.assert_array_equal(out[0].to_numpy(), A + A)
    assert not x.is_deleted
    np.testing.assert_array_equal(x.to_numpy(), A)


def test_jax_donate_argnums_program_donates(client):
    jax = pytest.importorskip("jax")
    spec = jax.ShapeDtypeStruct((2, 3), np.float32)
    text = jax.jit(lambda a: a * 2.0 + 1.0, donate_argnums=0).trace(spec).lower(
        lowering_platforms=("cpu",)).as_text()
    assert "tf.aliasing_output" in text or "jax.buffer_donor" in text
    executable = client.compile(text)
    x = client.buffer_from_numpy(A)
    (out,) = executable.execute([x])
    np.testing.assert_array_equal(out[0].to_numpy(), A * 2 + 1)
    assert x.is_deleted


# --------------------------------------------------------------------------
# Older callers (shorter structs)
# --------------------------------------------------------------------------

TORCH_XLA_29_EXECUTE_OPTIONS_SIZE = 80  # PJRT_ExecuteOptions up to `context`


def test_old_execute_options_size_works_and_gives_the_same_result(client):
    assert P.STRUCT_SIZES["PJRT_ExecuteOptions"] > TORCH_XLA_29_EXECUTE_OPTIONS_SIZE
    executable = client.compile(MULTI)
    buffers = [client.buffer_from_numpy(x) for x in (A, B, K)]
    (new,) = executable.execute(buffers)
    (old,) = executable.execute(buffers, options_struct_size=TORCH_XLA_29_EXECUTE_OPTIONS_SIZE)
    _same_bits([o.to_numpy() for o in old], [o.to_numpy() for o in new])
    _check_multi([o.to_numpy() for o in old])


def test_stock_cpu_plugin_rejects_old_execute_options_size(cpu_client):
    # Why the plugin matters for torch-xla 2.9: the stock plugin refuses it.
    executable = cpu_client.compile(MULTI)
    buffers = [cpu_client.buffer_from_numpy(x) for x in (A, B, K)]
    with pjrt_error(INVALID, "Unexpected PJRT_ExecuteOptions size: expected 112, got 80"):
        executable.execute(buffers, options_struct_size=TORCH_XLA_29_EXECUTE_OPTIONS_SIZE)


def test_old_execute_options_fields_past_its_size_are_ignored(plugin_api, client):
    # An old caller's struct ends at 80 bytes; whatever follows is not its data.
    executable = client.compile(DOUBLE)
    opts = P.PJRT_ExecuteOptions()
    opts.struct_size = TORCH_XLA_29_EXECUTE_OPTIONS_SIZE
    junk_ids = (ctypes.c_int * 3)(99, 98, 97)
    junk_incarnations = (ctypes.c_int64 * 3)(-1, -2, -3)
    location = ctypes.create_string_buffer(b"not from this caller")
    opts.call_location = ctypes.addressof(location)
    opts.num_tasks = 3
    opts.task_ids = ctypes.addressof(junk_ids)
    opts.incarnation_ids = ctypes.addressof(junk_incarnations)
    outputs, event = _raw_execute(plugin_api, executable, [client.buffer_from_numpy(A)],
                                  options=opts)
    event.await_()
    event.destroy()
    np.testing.assert_array_equal(outputs[0].to_numpy(), A + A)


def test_old_execute_args_without_execute_device(plugin_api, client):
    # Execute_Args from before `execute_device`: the field's bytes must be ignored,
    # so the program runs where it was compiled (core 0), not on device 1.
    executable = client.compile(DOUBLE)
    old_size = P.PJRT_LoadedExecutable_Execute_Args.execute_device.offset
    outputs, event = _raw_execute(plugin_api, executable, [client.buffer_from_numpy(A)],
                                  struct_size=old_size, execute_device=client.devices()[1])
    event.await_()
    event.destroy()
    assert outputs[0].device.id == 0
    np.testing.assert_array_equal(outputs[0].to_numpy(), A + A)


def test_old_deserialize_args_without_overridden_options(plugin_api, client):
    with client.compile(DOUBLE).get_executable() as ex:
        data = ex.serialize()
    old_size = P.PJRT_Executable_DeserializeAndLoad_Args.overridden_serialized_compile_options.offset
    junk = b"\xff\xff\xff"  # would be refused if it were read
    a = plugin_api.call("PJRT_Executable_DeserializeAndLoad", struct_size=old_size, client=client,
                        serialized_executable=data, serialized_executable_size=len(data),
                        overridden_serialized_compile_options=junk,
                        overridden_serialized_compile_options_size=len(junk))
    loaded = P.LoadedExecutable(client, a.loaded_executable)
    (out,) = loaded.execute([client.buffer_from_numpy(A)])
    np.testing.assert_array_equal(out[0].to_numpy(), A + A)


def test_old_compiled_memory_stats_args_without_host_fields(plugin_api, client):
    cls = P.PJRT_Executable_GetCompiledMemoryStats_Args
    with client.compile(MULTI).get_executable() as ex:
        args = cls()
        ctypes.memset(ctypes.addressof(args), 0x5A, ctypes.sizeof(args))
        args.struct_size = cls.host_generated_code_size_in_bytes.offset
        args.extension_start = None
        args.executable = ex.ptr
        plugin_api.call_args("PJRT_Executable_GetCompiledMemoryStats", args)
    assert args.argument_size_in_bytes == 52
    tail = ctypes.string_at(ctypes.addressof(args) + args.struct_size,
                            ctypes.sizeof(cls) - args.struct_size)
    assert tail == b"\x5a" * len(tail)


# --------------------------------------------------------------------------
# Loaded executable lifetime
# --------------------------------------------------------------------------

def test_loaded_executable_is_deleted_after_delete(client):
    # pjrt_c_api.h: IsDeleted is true iff PJRT_LoadedExecutable_Delete was called.
    executable = client.compile(DOUBLE)
    assert not executable.is_deleted
    executable.delete()
    assert executable.is_deleted


def test_execute_after_delete_is_refused(client):
    # pjrt_c_api.h: after Delete only IsDeleted and Destroy may be used.
    executable = client.compile(DOUBLE)
    x = client.buffer_from_numpy(A)
    executable.delete()
    with pytest.raises(P.PjrtError) as info:
        executable.execute([x])
    err = info.value
    assert err.code in (INVALID, P.ErrorCode.FAILED_PRECONDITION), err
    assert "PJRT_LoadedExecutable_Execute" in err.message and "deleted" in err.message
    np.testing.assert_array_equal(x.to_numpy(), A)


# --------------------------------------------------------------------------
# Nothing in, nothing out (effects-only programs, dtype probes)
# --------------------------------------------------------------------------

NO_RESULTS = """
func.func @main(%a: tensor<2x3xf32>) -> () {
  return
}"""

NOTHING_AT_ALL = """
func.func @main() -> () {
  return
}"""

NO_ARGUMENTS = """
func.func @main() -> tensor<2xi32> {
  %0 = stablehlo.constant dense<[7, -3]> : tensor<2xi32>
  return %0 : tensor<2xi32>
}"""


def _execute_with_lists(api, executable, argument_lists, num_args, output_lists, num_devices=1):
    """PJRT_LoadedExecutable_Execute with the caller's own (possibly null) lists; returns the
    completion events."""
    events = (ctypes.c_void_p * max(num_devices, 1))()
    api.call("PJRT_LoadedExecutable_Execute", executable=executable, options=None,
             argument_lists=argument_lists, num_devices=num_devices, num_args=num_args,
             output_lists=output_lists, device_complete_events=events)
    done = [P.Event(api, e, executable.client) for e in events[:num_devices]]
    for event in done:
        event.await_()
        event.destroy()


# The stock CPU plugin dereferences these lists even when they hold nothing (it crashes on a
# null one), so it is run with empty rows; the plugin takes null as well.
@pytest.mark.parametrize("lists", ["null_output_lists", "null_output_row"])
def test_program_without_results_runs_with_null_output_lists(plugin_api, client, cpu_client, lists):
    executable = client.compile(NO_RESULTS)
    assert executable.num_outputs == 0 == cpu_client.compile(NO_RESULTS).num_outputs
    a = client.buffer_from_numpy(A)
    args = (ctypes.c_void_p * 1)(a.ptr)
    arg_lists = (ctypes.c_void_p * 1)(ctypes.addressof(args))
    out_lists = None if lists == "null_output_lists" else (ctypes.c_void_p * 1)(None)
    _execute_with_lists(plugin_api, executable, arg_lists, 1, out_lists)
    # The argument is untouched and still usable.
    np.testing.assert_array_equal(a.to_numpy(), A)
    assert cpu_client.compile(NO_RESULTS).execute([cpu_client.buffer_from_numpy(A)]) == [[]]


def test_program_with_no_arguments_and_no_results_runs_with_every_list_null(plugin_api, client, cpu_client):
    executable = client.compile(NOTHING_AT_ALL)
    _execute_with_lists(plugin_api, executable, None, 0, None)
    # Through empty (non-null) rows too, as the stock plugin needs them.
    assert executable.execute([]) == [[]] == cpu_client.compile(NOTHING_AT_ALL).execute([])


def test_program_with_no_arguments_matches_stock_cpu_plugin(plugin_api, client, cpu_client):
    executable = client.compile(NO_ARGUMENTS)
    outs = (ctypes.c_void_p * 1)()
    out_lists = (ctypes.c_void_p * 1)(ctypes.addressof(outs))
    _execute_with_lists(plugin_api, executable, None, 0, out_lists)
    got = P.Buffer(client, outs[0]).to_numpy()
    _same_bits([got], _run(cpu_client, NO_ARGUMENTS, []))
    np.testing.assert_array_equal(got, [7, -3])


def test_two_replicas_without_results_run_on_both_cores(plugin_api, client):
    executable = client.compile(NO_RESULTS, compile_options=P.compile_options_proto(num_replicas=2))
    buffers = [client.buffer_from_numpy(A, device=d) for d in client.devices()]
    rows = [(ctypes.c_void_p * 1)(b.ptr) for b in buffers]
    arg_lists = (ctypes.c_void_p * 2)(*[ctypes.addressof(r) for r in rows])
    _execute_with_lists(plugin_api, executable, arg_lists, 1, None, num_devices=2)
    assert executable.execute([[b] for b in buffers]) == [[], []]


def test_program_with_results_still_needs_output_lists(plugin_api, client):
    executable = client.compile(DOUBLE)
    a = client.buffer_from_numpy(A)
    args = (ctypes.c_void_p * 1)(a.ptr)
    arg_lists = (ctypes.c_void_p * 1)(ctypes.addressof(args))
    with pjrt_error(INVALID, "PJRT_LoadedExecutable_Execute", "`output_lists` is null"):
        _execute_with_lists(plugin_api, executable, arg_lists, 1, None)
    with pjrt_error(INVALID, "PJRT_LoadedExecutable_Execute", "output list 0 is null"):
        _execute_with_lists(plugin_api, executable, arg_lists, 1, (ctypes.c_void_p * 1)(None))


def test_program_with_arguments_still_needs_argument_lists(plugin_api, client):
    executable = client.compile(NO_RESULTS)
    with pjrt_error(INVALID, "PJRT_LoadedExecutable_Execute", "`argument_lists` is null"):
        _execute_with_lists(plugin_api, executable, None, 1, None)


# --------------------------------------------------------------------------
# Execute contexts
# --------------------------------------------------------------------------

def test_execute_context_is_created_passed_to_execute_and_destroyed(plugin_api, client):
    ctx = plugin_api.call("PJRT_ExecuteContext_Create").context
    assert ctx
    opts = P.PJRT_ExecuteOptions()
    opts.struct_size = ctypes.sizeof(opts)
    opts.context = ctx
    executable = client.compile(DOUBLE)
    outputs, event = _raw_execute(plugin_api, executable, [client.buffer_from_numpy(A)], options=opts)
    event.await_()
    np.testing.assert_array_equal(outputs[0].to_numpy(), A * 2)
    plugin_api.call("PJRT_ExecuteContext_Destroy", context=ctx)


def test_execute_context_destroy_rejects_null(plugin_api):
    with pjrt_error(INVALID, "PJRT_ExecuteContext_Destroy", "`context` is null"):
        plugin_api.call("PJRT_ExecuteContext_Destroy", context=None)


def test_deserialized_program_without_results_runs_with_null_lists(plugin_api, client):
    executable = client.deserialize_and_load(client.compile(NOTHING_AT_ALL).get_executable().serialize())
    _execute_with_lists(plugin_api, executable, None, 0, None)
    assert executable.execute([]) == [[]]


# ---------------------------------------------------------------- one core at a time


@pytest.fixture
def quick_client(plugin_api, monkeypatch):
    """A client whose collective timeout is 2 s (read when a client is made)."""
    monkeypatch.setenv("PJRT_NEURON_COLLECTIVE_TIMEOUT", "2")
    c = P.Client(plugin_api)
    yield c
    c.close()


def launch_on_each_core(executable, client, inputs, launch_id):
    """Each core's share launched from a thread of its own (execute_device), as torch-xla's
    thread-per-device data parallel does."""
    devices = client.addressable_devices()
    results = [None] * len(inputs)

    def launch(core):
        try:
            results[core] = executable.execute([[client.buffer_from_numpy(inputs[core], device=devices[core])]],
                                               execute_device=devices[core], launch_id=launch_id)[0][0].to_numpy()
        except P.PjrtError as error:
            results[core] = error
    threads = [threading.Thread(target=launch, args=(core,)) for core in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_a_collective_program_launched_on_one_core_alone_fails_in_time_and_the_process_goes_on(quick_client):
    # XLA's CPU engine would wait 40 s inside the launch and then end the process.
    client = quick_client
    executable = client.compile(ALL_REDUCE, compile_options=P.compile_options_proto(num_replicas=2))
    devices = client.addressable_devices()
    x = np.array([1, 2], np.float32)
    start = time.monotonic()
    with pjrt_error(P.ErrorCode.DEADLINE_EXCEEDED, "PJRT_LoadedExecutable_Execute",
                    "NeuronCore(s) 1 did not launch it within 2 s (PJRT_NEURON_COLLECTIVE_TIMEOUT)") as alone:
        executable.execute([[client.buffer_from_numpy(x, device=devices[0])]], execute_device=devices[0], launch_id=5)
    waited = time.monotonic() - start
    assert 1.5 < waited < 60, waited
    # Core 1's launch of that execution comes too late: it fails at once with the same status.
    with pjrt_error(P.ErrorCode.DEADLINE_EXCEEDED, alone.value.message.split(": ", 2)[-1]):
        executable.execute([[client.buffer_from_numpy(x, device=devices[1])]], execute_device=devices[1], launch_id=5)
    # Launched on both, from a thread each, it runs: the all-reduce of both cores' values.
    for got in launch_on_each_core(executable, client, [x, x * 10], launch_id=6):
        np.testing.assert_array_equal(got, x * 11)


def test_a_program_without_collectives_launched_on_one_core_runs_at_once(quick_client):
    client = quick_client
    executable = client.compile(PER_REPLICA, compile_options=P.compile_options_proto(num_replicas=2))
    device = client.addressable_devices()[1]
    x = np.array([1, 2], np.float32)
    start = time.monotonic()
    (out,) = executable.execute([[client.buffer_from_numpy(x, device=device)]], execute_device=device)
    np.testing.assert_array_equal(out[0].to_numpy(), x + 1)  # replica 1
    assert time.monotonic() - start < 1.5  # it did not wait for core 0


def test_one_core_launches_of_a_two_core_program_keep_running_on_the_newer_engine_build(plugin_api):
    # lammps-jax-pjrt-cpu holds a launch of a program of several cores until all of them launch it;
    # torch-xla launches each program on one core, so without the single-core copy the second hung.
    path = config.engine_builds()["lammps-jax-pjrt-cpu"]
    assert path is not None, "pip install '.[engine-jax]'"
    client = P.Client(plugin_api, {"engine_library_path": path})
    try:
        assert client.platform_version.endswith(", pjrt_c_api_cpu_plugin.so)"), client.platform_version
        executable = client.compile(DOUBLE, compile_options=P.compile_options_proto(num_replicas=2))
        devices = client.addressable_devices()
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        results = []

        def launches():
            for step in range(3):
                for core in (0, 1, 1):
                    arg = client.buffer_from_numpy(x + step, device=devices[core])
                    (out,) = executable.execute([[arg]], execute_device=devices[core])
                    results.append((core, out[0].device.id == devices[core].id, out[0].to_numpy()))

        worker = threading.Thread(target=launches, daemon=True)
        worker.start()
        worker.join(120)
        assert not worker.is_alive(), f"launch {len(results) + 1} of 9 never finished"
        for i, (core, on_core, got) in enumerate(results):
            assert on_core, (i, core)
            np.testing.assert_array_equal(got, (x + i // 3) * 2)
    finally:
        client.close()



def test_one_core_launches_of_a_program_that_reads_its_core_give_that_core_numbers_on_the_newer_build(
        plugin_api):
    # No single-core copy can stand in (replica 0 everywhere): every core runs it, one core's results kept.
    client = P.Client(plugin_api, {"engine_library_path": config.engine_builds()["lammps-jax-pjrt-cpu"]})
    try:
        executable = client.compile(PER_REPLICA, compile_options=P.compile_options_proto(num_replicas=2))
        devices = client.addressable_devices()
        x = np.array([1, 2], np.float32)
        for core in (1, 0, 1):
            arg = client.buffer_from_numpy(x, device=devices[core])
            (out,) = executable.execute([[arg]], execute_device=devices[core])
            assert out[0].device.id == devices[core].id
            np.testing.assert_array_equal(out[0].to_numpy(), x + core)
            np.testing.assert_array_equal(arg.to_numpy(), x)  # the argument is untouched
    finally:
        client.close()


def test_one_core_launches_of_a_collective_from_a_thread_per_core_meet_on_the_newer_build(plugin_api):
    # torch-xla's one-process data parallel: each core's thread launches the program on its core.
    client = P.Client(plugin_api, {"engine_library_path": config.engine_builds()["lammps-jax-pjrt-cpu"]})
    try:
        executable = client.compile(ALL_REDUCE, compile_options=P.compile_options_proto(num_replicas=2))
        devices = client.addressable_devices()

        def launch(core, step):
            arg = client.buffer_from_numpy(np.full(2, core + step, np.float32), device=devices[core])
            (out,) = executable.execute([[arg]], execute_device=devices[core])
            return out[0].to_numpy()

        with ThreadPoolExecutor(2) as pool:
            for step in range(3):
                futures = [pool.submit(launch, core, step) for core in (0, 1)]
                for f in futures:
                    np.testing.assert_array_equal(f.result(timeout=120), np.full(2, 1 + 2 * step, np.float32))
    finally:
        client.close()
