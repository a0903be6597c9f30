"""Compilation in a helper process (PJRT_NEURON_COMPILE_ISOLATION, on by default): a program on
which XLA's CPU compiler stops its own process (a failed internal check, abort()) fails that
compilation with the check's message, and the client and its process go on; a caller's damaged
serialized executable, on which XLA's loader does the same, is refused.

The program: a module XLA's CPU compiler already optimised (JAX's CPU backend here), sent back as
an `hlo` program. Its fused computations carry no layouts, and the compiler's cost analysis
checks for them (`Check failed: input_shape.has_layout()`), which ends the process that runs it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pjrt_capi as P
import programs

REPO = Path(__file__).resolve().parent.parent


def aborting_program() -> bytes:
    jax = pytest.importorskip("jax")
    x = np.ones((2, 3, 4), np.float32)
    cpu = jax.devices("cpu")[0]
    compiled = jax.jit(lambda a: a.transpose(1, 0, 2) * 2 + 1, device=cpu).lower(x).compile()
    return compiled.runtime_executable().hlo_modules()[0].as_serialized_hlo_module_proto()


def compile_error(client, code: bytes) -> P.PjrtError:
    with pytest.raises(P.PjrtError) as raised:
        client.compile(code, format="hlo")
    return raised.value


def test_a_compiler_abort_fails_the_compilation_and_the_client_goes_on(client):
    code = aborting_program()
    # The second program differs by an unknown field (another compile-cache key, so it is not
    # failed from memory) and runs in a new helper.
    for variant in (code, code + b"\xc0\x3e\x01"):
        error = compile_error(client, variant)
        assert error.code == P.ErrorCode.INTERNAL, error
        assert error.message.startswith("PJRT_Client_Compile: "), error.message
        assert "compile helper" in error.message and "signal 6" in error.message, error.message
        assert "Check failed: input_shape.has_layout()" in error.message, error.message
    (out,) = client.compile(programs.DOUBLE).execute([client.buffer_from_numpy(np.arange(6, dtype=np.float32)
                                                                              .reshape(2, 3))])
    np.testing.assert_array_equal(out[0].to_numpy(), np.arange(6, dtype=np.float32).reshape(2, 3) * 2)


def test_ordinary_compile_errors_keep_their_code_and_message(client):
    error = compile_error(client, b"\x0a\x05not a module")
    assert error.code == P.ErrorCode.INVALID_ARGUMENT, error


def test_without_isolation_the_same_program_ends_the_process(tmp_path):
    # What the helper prevents, shown in a child process: PJRT_NEURON_COMPILE_ISOLATION=0.
    program = tmp_path / "program.pb"
    program.write_bytes(aborting_program())
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO / "tests")!r})
        import pjrt_capi as P, pjrt_neuron
        client = P.Client(P.Api(pjrt_neuron.library_path()))
        client.compile(open({str(program)!r}, "rb").read(), format="hlo")
        print("compiled")
    """)
    env = {**__import__("os").environ, "PJRT_NEURON_COMPILE_ISOLATION": "0", "PJRT_NEURON_COMPILE_CACHE": "0",
           "PJRT_NEURON_LOCK_DIR": str(tmp_path / "locks")}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == -6, (run.returncode, run.stdout, run.stderr[-2000:])
    assert "Check failed: input_shape.has_layout()" in run.stderr


def test_damaged_serialized_executables_are_refused_and_the_process_goes_on(client):
    # XLA's loader ends its process on some damaged object code (LLVM ERROR, failed checks,
    # segmentation faults):
    # a caller's serialized executable is loaded by the helper first. Damage: 4 bytes of 0xff
    # at every 8th offset of the executable's object file.
    magic = b"pjrt-neuron-executable/1\n"
    data = client.compile(programs.DOUBLE).get_executable().serialize()
    body = data[len(magic):]
    elf = body.find(b"\x7fELF")
    assert elf > 0, "the engine's executable holds no ELF object"
    ended, refused = [], 0
    for offset in range(elf + 64, len(body) - 4, 8):
        damaged = body[:offset] + b"\xff" * 4 + body[offset + 4:]
        try:
            client.deserialize_and_load(magic + damaged)
        except P.PjrtError as error:
            refused += 1
            assert error.code == P.ErrorCode.INVALID_ARGUMENT, error
            assert error.message.startswith("PJRT_Executable_DeserializeAndLoad: "), error.message
            if "compile helper" in error.message:
                assert "was ended by signal" in error.message and "this process goes on" in error.message, error.message
                ended.append(offset)
    assert ended, "no damage ended the helper: nothing shows the process was protected"
    assert refused >= len(ended)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = client.deserialize_and_load(data).execute([client.buffer_from_numpy(x)])
    np.testing.assert_array_equal(out[0].to_numpy(), x * 2)


def test_a_client_closes_at_once_while_a_forked_child_holds_the_helper_socket(tmp_path):
    # A forked child (a DataLoader worker) inherits the socket to the helper; the client must
    # not wait for the helper to see its end.
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(REPO / "tests")!r})
        import pjrt_capi as P, pjrt_neuron, programs
        client = P.Client(P.Api(pjrt_neuron.library_path()))
        client.compile(programs.DOUBLE)
        child = os.fork()
        if child == 0:
            time.sleep(60)
            os._exit(0)
        start = time.monotonic()
        client.close()
        print("closed in", time.monotonic() - start)
        os.kill(child, 9)
        os.waitpid(child, 0)
    """)
    env = {**__import__("os").environ, "PJRT_NEURON_COMPILE_CACHE": "0", "PJRT_NEURON_LOCK_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    seconds = float(run.stdout.split("closed in")[1])
    assert seconds < 20, seconds


def test_without_a_helper_program_the_client_compiles_in_its_process_and_says_so(tmp_path):
    # A helper that cannot start must not stop every compile: the engine compiles itself, warning once.
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO / "tests")!r})
        import numpy as np, pjrt_capi as P, pjrt_neuron, programs
        client = P.Client(P.Api(pjrt_neuron.library_path()))
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        for program in (programs.DOUBLE, "// another key\\n" + programs.DOUBLE):
            (out,) = client.compile(program).execute([client.buffer_from_numpy(x)])
            assert (out[0].to_numpy() == x * 2).all()
        data = client.compile(programs.DOUBLE).get_executable().serialize()
        (out,) = client.deserialize_and_load(data).execute([client.buffer_from_numpy(x)])
        assert (out[0].to_numpy() == x * 2).all()
        print("ran")
    """)
    env = {**__import__("os").environ, "PJRT_NEURON_INSTANCE_DAEMON": str(tmp_path / "no-such-helper"),
           "PJRT_NEURON_COMPILE_CACHE": "0", "PJRT_NEURON_LOCK_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "ran" in run.stdout, run.stderr[-2000:]
    warnings = [line for line in run.stderr.splitlines() if "pjrt-neuron: compiling in this process" in line]
    assert len(warnings) == 1, run.stderr[-2000:]
    assert str(tmp_path / "no-such-helper") in warnings[0] and "is missing" in warnings[0], warnings[0]
