"""PJRT C API: bad input.

Each case must come back as a PJRT_Error with the right code and a message that
names the PJRT function and the problem; the process must survive, and buffers
made before the error must keep their data (every test ends with `keeper()`).
"""

import ctypes
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

import pjrt_capi as P
from programs import DOUBLE, DONATING

INVALID = P.ErrorCode.INVALID_ARGUMENT



A = np.arange(6, dtype=np.float32).reshape(2, 3)


def expect_error(fn_name, code, call, *fragments):
    """Run `call`, which must fail with `code`; the message must name `fn_name`
    and contain each fragment.  Returns the PjrtError."""
    with pytest.raises(P.PjrtError) as info:
        call()
    err = info.value
    assert err.code == code, f"got {err.code_name}: {err.message}"
    assert fn_name in err.message, err.message
    for fragment in fragments:
        assert fragment in err.message, f"{fragment!r} not in {err.message!r}"
    return err


def error_of(api, err_ptr, fn_name):
    assert err_ptr, f"{fn_name} returned no error"
    return api.error_from_ptr(err_ptr, fn_name)


@pytest.fixture
def keeper(client):
    """Buffers made before the bad call; keeper() checks they kept their data."""
    data = np.arange(24, dtype=np.float32).reshape(4, 6) * 1.5 - 7
    buffers = [client.buffer_from_numpy(data, device=d) for d in client.devices()]

    def check():
        for buf in buffers:
            assert not buf.is_deleted
            np.testing.assert_array_equal(buf.to_numpy(), data)

    return check


@pytest.fixture
def double(client):
    return client.compile(DOUBLE)


def _from_host_raw(client, *, data=A, type=P.BufferType.F32, dims=(2, 3), device=None,
                   **fields):
    c_dims = (ctypes.c_int64 * max(len(dims), 1))(*dims)
    return client._call("PJRT_Client_BufferFromHostBuffer", data=data, type=type,
                        dims=c_dims, num_dims=len(dims),
                        device=device if device is not None else client.devices()[0],
                        **fields)


# --------------------------------------------------------------------------
# Malformed argument structs
# --------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    "PJRT_Buffer_ElementType", "PJRT_Client_Create", "PJRT_Client_Compile",
    "PJRT_LoadedExecutable_Execute", "PJRT_Client_BufferFromHostBuffer",
    "PJRT_Buffer_ToHostBuffer", "PJRT_Event_Await", "PJRT_Device_MemoryStats",
])
def test_null_args_pointer_is_invalid_argument(plugin_api, keeper, fn):
    err = error_of(plugin_api, plugin_api.function(fn)(None), fn)
    assert err.code == INVALID
    assert err.message.startswith(fn) and "null" in err.message
    keeper()


def test_error_functions_tolerate_null_args(plugin_api, keeper):
    # These return void, so they cannot report anything; they must just not crash.
    plugin_api.function("PJRT_Error_Destroy")(None)
    plugin_api.function("PJRT_Error_Message")(None)
    err = error_of(plugin_api, plugin_api.function("PJRT_Error_GetCode")(None),
                   "PJRT_Error_GetCode")
    assert err.code == INVALID
    keeper()


@pytest.mark.parametrize("fn", [
    "PJRT_Buffer_ElementType", "PJRT_Client_Create", "PJRT_Client_Compile",
    "PJRT_LoadedExecutable_Execute", "PJRT_Client_BufferFromHostBuffer",
    "PJRT_Buffer_ToHostBuffer", "PJRT_Device_MemoryStats",
])
@pytest.mark.parametrize("size", [0, 8])
def test_struct_size_too_short_is_invalid_argument(plugin_api, keeper, fn, size):
    expect_error(fn, INVALID, lambda: plugin_api.call(fn, struct_size=size), "struct_size")
    keeper()


def test_execute_options_struct_size_too_short(keeper, double, client):
    x = client.buffer_from_numpy(A)
    expect_error("PJRT_LoadedExecutable_Execute", INVALID,
                 lambda: double.execute([x], options_struct_size=8),
                 "PJRT_ExecuteOptions", "struct_size")
    keeper()


@pytest.mark.parametrize("fn, field", [
    ("PJRT_Client_Devices", "client"),
    ("PJRT_Client_Compile", "client"),
    ("PJRT_Device_GetDescription", "device"),
    ("PJRT_Device_MemoryStats", "device"),
    ("PJRT_DeviceDescription_Kind", "device_description"),
    ("PJRT_Memory_Kind", "memory"),
    ("PJRT_Buffer_Dimensions", "buffer"),
    ("PJRT_Buffer_ToHostBuffer", "src"),
    ("PJRT_Buffer_CopyToDevice", "buffer"),
    ("PJRT_Event_IsReady", "event"),
    ("PJRT_Executable_Name", "executable"),
    ("PJRT_LoadedExecutable_Execute", "executable"),
    ("PJRT_LoadedExecutable_GetExecutable", "loaded_executable"),
    ("PJRT_TopologyDescription_PlatformName", "topology"),
])
def test_null_handle_field_is_invalid_argument_naming_the_field(plugin_api, keeper, fn, field):
    expect_error(fn, INVALID, lambda: plugin_api.call(fn), f"`{field}`", "null")
    keeper()


def test_handle_of_the_wrong_type_is_refused_naming_both_types(plugin_api, keeper, client):
    device = client.devices()[0]
    expect_error("PJRT_Buffer_ElementType", INVALID,
                 lambda: plugin_api.call("PJRT_Buffer_ElementType", buffer=device.ptr),
                 "`buffer` is a PJRT_Device, not a PJRT_Buffer")
    executable = client.compile(DOUBLE)
    expect_error("PJRT_Event_IsReady", INVALID,
                 lambda: plugin_api.call("PJRT_Event_IsReady", event=executable.ptr),
                 "`event` is a PJRT_LoadedExecutable, not a PJRT_Event")
    keeper()


def test_destroyed_handles_are_refused_without_reading_them(plugin_api, keeper, client):
    # The registry answers from the handle's value: the freed memory is never read, so an
    # allocator that reuses it for another kind of object cannot make the handle pass.
    buf = client.buffer_from_numpy(A)
    stale = buf.ptr
    buf.destroy()
    expect_error("PJRT_Buffer_ElementType", INVALID,
                 lambda: plugin_api.call("PJRT_Buffer_ElementType", buffer=stale),
                 "`buffer` is not a live PJRT_Buffer (destroyed, or never one)")
    executable = client.compile(DOUBLE)
    stale_executable = executable.ptr
    executable.destroy()
    x = client.buffer_from_numpy(A)
    expect_error("PJRT_LoadedExecutable_Execute", INVALID,
                 lambda: plugin_api.call("PJRT_LoadedExecutable_Execute", executable=stale_executable),
                 "`executable` is not a live PJRT_LoadedExecutable")
    np.testing.assert_array_equal(x.to_numpy(), A)
    keeper()


def test_an_address_that_was_never_a_handle_is_refused(plugin_api, keeper):
    not_a_handle = ctypes.create_string_buffer(64)
    expect_error("PJRT_Buffer_ElementType", INVALID,
                 lambda: plugin_api.call("PJRT_Buffer_ElementType", buffer=ctypes.addressof(not_a_handle)),
                 "`buffer` is not a live PJRT_Buffer")
    keeper()


def test_a_destroyed_buffer_among_execute_arguments_is_refused(plugin_api, keeper, client):
    executable = client.compile(DOUBLE)
    live, gone = client.buffer_from_numpy(A), client.buffer_from_numpy(A)
    gone_ptr = gone.ptr
    gone.destroy()
    with pytest.raises(P.PjrtError) as info:
        executable.execute([type(live)(client, gone_ptr)])
    assert info.value.code == INVALID and "argument 0 is not a live buffer" in info.value.message
    (out,), = executable.execute([live])
    np.testing.assert_array_equal(out.to_numpy(), A + A)
    keeper()


def test_null_program_is_invalid_argument(keeper, client):
    expect_error("PJRT_Client_Compile", INVALID,
                 lambda: client._call("PJRT_Client_Compile", program=None), "`program`", "null")
    keeper()


# --------------------------------------------------------------------------
# Programs and compile options
# --------------------------------------------------------------------------

def test_unparsable_program_text_is_invalid_argument(keeper, client):
    err = expect_error("PJRT_Client_Compile", INVALID,
                       lambda: client.compile("func.func @main( this is not mlir"), "mlir")
    assert "error" in err.message.lower()  # the parser's diagnostic is passed on
    keeper()


def test_type_error_in_program_is_invalid_argument(keeper, client):
    bad = DOUBLE.replace("tensor<2x3xf32>\n}", "tensor<3x2xf32>\n}")
    expect_error("PJRT_Client_Compile", INVALID, lambda: client.compile(bad))
    keeper()


def test_garbage_hlo_bytes_are_invalid_argument(keeper, client):
    expect_error("PJRT_Client_Compile", INVALID,
                 lambda: client.compile(b"\x08\xff\xffgarbage\x00\x01", "hlo"), "HloModuleProto")
    keeper()


def test_unknown_program_format_names_the_format(keeper, client):
    expect_error("PJRT_Client_Compile", INVALID, lambda: client.compile(DOUBLE, "onnx"),
                 "'onnx'", "hlo", "mlir")
    keeper()


@pytest.mark.parametrize("fmt", ["mlir", "hlo"])
def test_empty_program_is_invalid_argument(keeper, client, fmt):
    expect_error("PJRT_Client_Compile", INVALID, lambda: client.compile(b"", fmt), "empty")
    keeper()


def test_more_replicas_than_cores_is_invalid_argument(keeper, client):
    expect_error("PJRT_Client_Compile", INVALID,
                 lambda: client.compile(DOUBLE,
                                        compile_options=P.compile_options_proto(num_replicas=4)),
                 "4 replicas", "(trn1.2xlarge) has 2")
    keeper()


def test_malformed_compile_options_are_invalid_argument(keeper, client):
    expect_error("PJRT_Client_Compile", INVALID,
                 lambda: client.compile(DOUBLE, compile_options=b"\xff\xff\xff"),
                 "CompileOptionsProto")
    keeper()


def test_empty_compile_options_compile_with_defaults(keeper, client):
    # The all-defaults proto says 0 replicas, on which the stock CPU plugin aborts;
    # we read it as 1 replica x 1 partition.
    executable = client.compile(DOUBLE, compile_options=b"")
    x = client.buffer_from_numpy(A)
    (out,) = executable.execute([x])
    np.testing.assert_array_equal(out[0].to_numpy(), A + A)
    keeper()


# --------------------------------------------------------------------------
# Serialized executables
# --------------------------------------------------------------------------

@pytest.mark.parametrize("data", [b"garbage bytes, not an executable", b"\x00" * 64, b""],
                         ids=["text", "zeros", "empty"])
def test_deserializing_garbage_is_invalid_argument(keeper, client, data):
    expect_error("PJRT_Executable_DeserializeAndLoad", INVALID,
                 lambda: client.deserialize_and_load(data), "executable")
    keeper()


def test_deserializing_a_truncated_executable_is_invalid_argument(keeper, client, double):
    # Corrupt input is the caller's problem, not an internal failure of the plugin.
    with double.get_executable() as ex:
        data = ex.serialize()
    expect_error("PJRT_Executable_DeserializeAndLoad", INVALID,
                 lambda: client.deserialize_and_load(data[: len(data) // 2]))
    keeper()


def test_deserializing_with_malformed_override_options(keeper, client, double):
    with double.get_executable() as ex:
        data = ex.serialize()
    expect_error("PJRT_Executable_DeserializeAndLoad", INVALID,
                 lambda: client.deserialize_and_load(data, compile_options=b"\xff\xff"),
                 "CompileOptionsProto")
    keeper()


# --------------------------------------------------------------------------
# Host buffers
# --------------------------------------------------------------------------

def test_dst_size_too_small_in_to_host_buffer(plugin_api, keeper, client):
    buf = client.buffer_from_numpy(A)
    out = np.zeros(3, np.float32)
    expect_error("PJRT_Buffer_ToHostBuffer", INVALID,
                 lambda: plugin_api.call("PJRT_Buffer_ToHostBuffer", src=buf, dst=out,
                                         dst_size=out.nbytes),
                 "dst_size", "12", "24")
    np.testing.assert_array_equal(out, 0)  # nothing written
    keeper()


@pytest.mark.parametrize("offset, size", [(20, 8), (-4, 4)])
def test_copy_raw_to_host_outside_the_buffer(plugin_api, keeper, client, offset, size):
    buf = client.buffer_from_numpy(np.arange(6, dtype=np.float32))
    out = np.zeros(4, np.float32)
    expect_error("PJRT_Buffer_CopyRawToHost", INVALID,
                 lambda: plugin_api.call("PJRT_Buffer_CopyRawToHost", buffer=buf, dst=out,
                                         offset=offset, transfer_size=size),
                 "outside", "24 bytes")
    keeper()


def test_negative_dimension_is_invalid_argument(keeper, client):
    expect_error("PJRT_Client_BufferFromHostBuffer", INVALID,
                 lambda: _from_host_raw(client, dims=(2, -3)), "negative", "-3")
    keeper()


@pytest.mark.parametrize("bad_type", [int(P.BufferType.INVALID), int(P.BufferType.TOKEN), 999],
                         ids=["INVALID", "TOKEN", "999"])
def test_invalid_element_type_is_invalid_argument(keeper, client, bad_type):
    expect_error("PJRT_Client_BufferFromHostBuffer", INVALID,
                 lambda: _from_host_raw(client, type=bad_type), "element type", str(bad_type))
    keeper()


def test_null_data_for_a_non_empty_shape(keeper, client):
    expect_error("PJRT_Client_BufferFromHostBuffer", INVALID,
                 lambda: _from_host_raw(client, data=None), "`data`")
    keeper()


def test_byte_strides_count_must_match_rank(keeper, client):
    strides = (ctypes.c_int64 * 1)(4)
    expect_error("PJRT_Client_BufferFromHostBuffer", INVALID,
                 lambda: _from_host_raw(client, byte_strides=strides, num_byte_strides=1),
                 "num_byte_strides")
    keeper()


def test_unknown_host_buffer_semantics(keeper, client):
    expect_error("PJRT_Client_BufferFromHostBuffer", INVALID,
                 lambda: _from_host_raw(client, host_buffer_semantics=77), "semantics", "77")
    keeper()


def test_neither_device_nor_memory(keeper, client):
    dims = (ctypes.c_int64 * 2)(2, 3)
    expect_error("PJRT_Client_BufferFromHostBuffer", INVALID,
                 lambda: client._call("PJRT_Client_BufferFromHostBuffer", data=A,
                                      type=P.BufferType.F32, dims=dims, num_dims=2),
                 "device", "memory")
    keeper()


# --------------------------------------------------------------------------
# Deleted and donated buffers
# --------------------------------------------------------------------------

@pytest.fixture
def deleted(client):
    buf = client.buffer_from_numpy(A)
    buf.delete()
    return buf


def test_to_host_after_delete(keeper, deleted):
    expect_error("PJRT_Buffer_ToHostBuffer", INVALID, deleted.to_numpy, "deleted or donated")
    keeper()


def test_execute_with_deleted_argument(keeper, double, deleted):
    expect_error("PJRT_LoadedExecutable_Execute", INVALID, lambda: double.execute([deleted]),
                 "argument 0", "deleted or donated")
    keeper()


def test_copy_after_delete(keeper, client, deleted):
    expect_error("PJRT_Buffer_CopyToDevice", INVALID,
                 lambda: deleted.copy_to_device(client.devices()[1]), "deleted or donated")
    keeper()


def test_ready_event_after_delete(keeper, deleted):
    expect_error("PJRT_Buffer_ReadyEvent", INVALID, deleted.ready_event, "deleted or donated")
    keeper()


def test_donated_buffer_cannot_be_used_again(keeper, client):
    executable = client.compile(DONATING)
    x = client.buffer_from_numpy(A)
    executable.execute([x])
    assert x.is_deleted
    expect_error("PJRT_Buffer_ToHostBuffer", INVALID, x.to_numpy, "deleted or donated")
    expect_error("PJRT_LoadedExecutable_Execute", INVALID, lambda: executable.execute([x]),
                 "deleted or donated")
    keeper()


def test_donated_buffer_is_refused_by_the_next_execute_without_being_asked(keeper, client):
    # Execute checks arguments from what it saw of earlier runs, not by asking the engine.
    executable = client.compile(DONATING)
    before = client.devices()[0].memory_stats()["bytes_in_use"]
    x = client.buffer_from_numpy(A)
    (out,) = executable.execute([x])
    expect_error("PJRT_LoadedExecutable_Execute", INVALID, lambda: executable.execute([x]),
                 "argument 0", "deleted or donated")
    # The donated input no longer counts against HBM; only the output does.
    assert client.devices()[0].memory_stats()["bytes_in_use"] == before + out[0].on_device_size
    keeper()


# --------------------------------------------------------------------------
# Placement: cores, clients, argument lists
# --------------------------------------------------------------------------

def test_argument_on_the_wrong_core(keeper, client, double):
    x1 = client.buffer_from_numpy(A, device=client.devices()[1])
    expect_error("PJRT_LoadedExecutable_Execute", INVALID, lambda: double.execute([x1]),
                 "argument 0", "NeuronCore 1", "NeuronCore 0")
    keeper()


def test_execute_device_on_a_non_portable_executable(keeper, client, double):
    d1 = client.devices()[1]
    x1 = client.buffer_from_numpy(A, device=d1)
    expect_error("PJRT_LoadedExecutable_Execute", INVALID,
                 lambda: double.execute([x1], execute_device=d1), "device")
    keeper()


@pytest.fixture
def other_client(plugin_api):
    c = P.Client(plugin_api)
    yield c
    c.close()


def test_host_buffer_onto_another_clients_device(keeper, client, other_client):
    expect_error("PJRT_Client_BufferFromHostBuffer", INVALID,
                 lambda: client.buffer_from_numpy(A, device=other_client.devices()[0]),
                 "another client")
    expect_error("PJRT_Client_BufferFromHostBuffer", INVALID,
                 lambda: client.buffer_from_numpy(
                     A, memory=other_client.devices()[0].default_memory),
                 "another client")
    keeper()


def test_execute_with_another_clients_buffer(keeper, double, other_client):
    foreign = other_client.buffer_from_numpy(A)
    expect_error("PJRT_LoadedExecutable_Execute", INVALID, lambda: double.execute([foreign]),
                 "argument 0", "another client")
    np.testing.assert_array_equal(foreign.to_numpy(), A)
    keeper()


def test_execute_device_of_another_client(keeper, client, other_client):
    portable = client.compile(DOUBLE, compile_options=P.compile_options_proto(
        compile_portable_executable=True))
    x = client.buffer_from_numpy(A)
    expect_error("PJRT_LoadedExecutable_Execute", INVALID,
                 lambda: portable.execute([x], execute_device=other_client.devices()[0]),
                 "execute_device", "another client")
    keeper()


def test_copy_to_another_clients_device(keeper, client, other_client):
    x = client.buffer_from_numpy(A)
    expect_error("PJRT_Buffer_CopyToDevice", INVALID,
                 lambda: x.copy_to_device(other_client.devices()[1]), "another client")
    keeper()


def test_too_many_argument_lists(keeper, client, double):
    x0 = client.buffer_from_numpy(A)
    x1 = client.buffer_from_numpy(A, device=client.devices()[1])
    expect_error("PJRT_LoadedExecutable_Execute", INVALID, lambda: double.execute([[x0], [x1]]),
                 "1 NeuronCore", "2 argument lists")
    keeper()


def test_too_few_argument_lists_for_two_replicas(keeper, client):
    two = client.compile(DOUBLE, compile_options=P.compile_options_proto(num_replicas=2))
    x0 = client.buffer_from_numpy(A)
    expect_error("PJRT_LoadedExecutable_Execute", INVALID, lambda: two.execute([x0]),
                 "2 NeuronCore", "1 argument list")
    keeper()


@pytest.mark.parametrize("count", [0, 2])
def test_wrong_number_of_arguments(keeper, client, double, count):
    args = [client.buffer_from_numpy(A) for _ in range(count)]
    expect_error("PJRT_LoadedExecutable_Execute", INVALID, lambda: double.execute(args),
                 f"supplied {count} ", "expected 1")  # buffers or arguments, as the engine build says
    keeper()


# --------------------------------------------------------------------------
# Resource exhaustion (subprocess: a capped address space keeps the host safe)
# --------------------------------------------------------------------------

_HUGE_OUTPUT_SCRIPT = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    sys.path.insert(0, {tests_dir!r})
    import numpy as np
    import pjrt_neuron
    pjrt_neuron.prepare_environment()
    import pjrt_capi as P
    api = P.Api(pjrt_neuron.library_path())
    client = P.Client(api)
    keep = client.buffer_from_numpy(np.arange(5, dtype=np.float32))
    code = '''
    func.func @main(%a: tensor<f32>) -> tensor<68719476736xf32> {{
      %b = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<68719476736xf32>
      return %b : tensor<68719476736xf32>
    }}'''
    executable = client.compile(code)
    try:
        executable.execute([client.buffer_from_numpy(np.float32(1))])
        print("NO ERROR")
    except P.PjrtError as e:
        print("CODE", e.code_name)
        print("MESSAGE", e.message)
    assert (keep.to_numpy() == np.arange(5)).all()
    client.close()
    print("SURVIVED")
""")


def test_output_too_large_for_memory_is_resource_exhausted():
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    # Its own simulated instance: this process's client holds the session's cores.
    env = dict(os.environ, PJRT_NEURON_LOCK_DIR=tempfile.mkdtemp(prefix="pjrt-neuron-locks-"))
    proc = subprocess.run([sys.executable, "-c", _HUGE_OUTPUT_SCRIPT.format(tests_dir=tests_dir)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "CODE RESOURCE_EXHAUSTED" in proc.stdout, proc.stdout
    assert "MESSAGE PJRT_LoadedExecutable_Execute" in proc.stdout, proc.stdout
    assert "SURVIVED" in proc.stdout


# No test of a completion event that carries an execution's error: no way was found to make an
# execution fail after launch. On the simulator engine bad custom calls and host send/recv fail
# at compile time and allocation failures come back from Execute itself; the Neuron engine and
# the daemon report every runtime failure from Execute as well (their events are made complete).


def test_plugin_attributes_accept_the_size_older_headers_declare(plugin_api, keeper):
    # torch-xla 2.8's header ends PJRT_Plugin_Attributes_Args at `attributes` (24 bytes), though
    # its struct has `num_attributes` as well; torch-xla aborts the process if this call fails.
    args = plugin_api.call("PJRT_Plugin_Attributes", struct_size=24)
    assert args.num_attributes == len(plugin_api.plugin_attributes()) > 0
    expect_error("PJRT_Plugin_Attributes", INVALID,
                 lambda: plugin_api.call("PJRT_Plugin_Attributes", struct_size=16), "struct_size")
    keeper()
