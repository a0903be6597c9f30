"""Writes the canned programs and options the native unit tests read (plugin/tests/unit/*_test.cc).

    .venv/bin/python plugin/tests/unit/data/make_programs.py

They are real framework output, so the readers are tested against what XLA, JAX and torch-xla
write rather than against protos built with the field numbers the code itself uses:

- jax_*.pb: a JAX program as the plugin analyses it: lowered by JAX, compiled by the stock XLA
  CPU plugin (the engine the plugin runs), and its optimized program, an HloModuleProtoWithConfig.
- torch_*.pb: a torch-xla program as torch-xla sends it, an HloModuleProto, with the source
  locations of XLA_IR_DEBUG / XLA_HLO_DEBUG.
- options_*.pb, assignment_*.pb: xla.CompileOptionsProto and xla.DeviceAssignmentProto as
  jaxlib serialises them.

The line a finding must point at is marked `# case: <name>`; the tests look the marker up in
this file, so moving a case moves what they expect. Each framework runs in a process of its own,
started with this file's path relative to data/, so the metadata names "make_programs.py" and no
checkout path. The engine's debug options hold maps, serialised in hash order, so the jax_*.pb
bytes differ from run to run: regenerate when a case changes, not on every run.
"""

import os
import subprocess
import sys
from pathlib import Path


def write(name, data):
    Path(name).write_bytes(data)
    print(f"{name}: {len(data)} bytes")


# ---------------------------------------------------------------- JAX


def jax_cases():
    import jax
    import jax.numpy as jnp
    from jax import lax

    x = jnp.arange(1.0, 5.0, dtype=jnp.float32)
    k = jnp.array([3, 1, 2, 1], dtype=jnp.int32)

    def float64(v):
        return v.astype(jnp.float64) * 2  # case: float64

    def int64(v):
        return v.astype(jnp.int64) * 3  # case: int64

    def complex_multiply(v):
        return (v.astype(jnp.complex64) * (1 + 2j)).real  # case: complex

    def fp8_e4m3fnuz(v):
        return v.astype(jnp.float8_e4m3fnuz).astype(jnp.float32)  # case: fp8-e4m3fnuz

    def fp8_e4m3fn(v):
        return v.astype(jnp.float8_e4m3fn).astype(jnp.float32)

    def cond(v):
        return lax.cond(v.sum() > 0, lambda a: a + 1, lambda a: a * 3, v)  # case: cond

    def while_loop(v):
        return lax.while_loop(lambda a: a.sum() < 100, lambda a: a * 2, v)  # case: while

    def fori_loop(v):
        return lax.fori_loop(0, 5, lambda i, a: jnp.sin(a) + i, v)

    def integer_dot(v):
        a = v.reshape(2, 2)
        return a @ a  # case: integer-dot

    def argmax(v):
        return jnp.argmax(v * 2)  # case: argmax

    def two_key_sort(v):
        return lax.sort((v, v * 2), num_keys=2)[0]  # case: sort-two-keys

    def plain_sort(v):
        return jnp.sort(v)

    def mlp(v):
        w = jnp.ones((4, 4), jnp.float32) / 4
        return jnp.tanh(v @ w) @ w

    return [
        ("jax_float64", float64, x, True),
        ("jax_int64", int64, k, True),
        ("jax_complex", complex_multiply, x, False),
        ("jax_fp8_e4m3fnuz", fp8_e4m3fnuz, x, False),
        ("jax_fp8_e4m3fn", fp8_e4m3fn, x, False),
        ("jax_cond", cond, x, False),
        ("jax_while", while_loop, x, False),
        ("jax_fori", fori_loop, x, False),
        ("jax_integer_dot", integer_dot, k, False),
        ("jax_argmax", argmax, x, False),
        ("jax_sort_two_keys", two_key_sort, k, False),
        ("jax_sort", plain_sort, k, False),
        ("jax_mlp", mlp, x, False),
    ]


def jax_psum_spmd():
    """A psum over two partitions: the optimized program's all-reduce carries a channel id."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, PartitionSpec as P

    mesh = Mesh(jax.devices()[:2], ("i",))

    def psum(v):
        return jax.lax.psum(v, "i")

    f = jax.jit(jax.shard_map(psum, mesh=mesh, in_specs=P("i"), out_specs=P()))
    return f.lower(jnp.arange(4.0, dtype=jnp.float32))


def write_jax_programs():
    import jax

    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", 2)
    sys.path.insert(0, str(Path.cwd().parents[3] / "tests"))
    import pjrt_capi

    api = pjrt_capi.Api(str(pjrt_capi.cpu_plugin_path()))
    with pjrt_capi.Client(api) as client:
        def optimized(lowered, options=None):
            executable = client.compile(lowered.as_text(debug_info=True), "mlir", options)
            fmt, code = executable.get_executable().optimized_program()
            assert fmt == "hlo_with_config", fmt
            return code

        for name, fn, arg, x64 in jax_cases():
            with jax.enable_x64(x64):
                write(f"{name}.pb", optimized(jax.jit(fn).lower(arg)))
        from jax._src import compiler

        spmd = compiler.get_compile_options(num_replicas=1, num_partitions=2, device_assignment=[[0, 1]])
        spmd.executable_build_options.use_spmd_partitioning = True
        spmd.executable_build_options.use_shardy_partitioner = True
        write("jax_psum_spmd.pb", optimized(jax_psum_spmd(), spmd.SerializeAsString()))


def write_options():
    import numpy as np
    from jax._src import compiler
    from jax._src.lib import xla_client

    write("options_default.pb", xla_client.CompileOptions().SerializeAsString())
    write("options_two_replicas.pb", compiler.get_compile_options(
        num_replicas=2, num_partitions=1, device_assignment=[5, 7]).SerializeAsString())
    write("assignment_2x2.pb", xla_client.DeviceAssignment.create(np.array([[1, 2], [3, 4]])).serialize())


# ---------------------------------------------------------------- torch-xla


def write_torch_programs():
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import _XLAC

    device = torch_xla.device()

    def hlo(*tensors, last=False):
        proto = _XLAC._get_xla_tensors_hlo_proto(list(tensors))
        if not last:
            torch_xla.sync()  # the next program starts afresh (the collective token chains them)
        return proto

    def long_arithmetic():
        steps = torch.arange(10, device=device)  # case: torch-arange
        return steps * 3 + 1  # case: torch-long-arithmetic

    def nonzero():
        v = torch.tensor([0.0, 1.0, 0.0, 2.0], device=device)
        return torch.nonzero(v)  # case: torch-nonzero

    # xm.all_gather as rank `rank` of two lowers it: the rank's slice padded into place, then a
    # pinned all-reduce, a tuple with the collective token. The calls below are the ones it
    # makes, without the world-size check that turns them off in one process (and the pad
    # without F.pad's Python frame, whose metadata would name the site-packages path).
    def gather_as_rank(rank):
        v = torch.tensor([[rank * 10.0, rank * 10.0 + 1]], device=device)
        padded = torch.constant_pad_nd(v, [0, 0, rank, 1 - rank])
        return _XLAC._xla_all_reduce(xm.REDUCE_SUM, padded, 1.0, [], True)

    # One of each collective the rewrite gives a channel: a coalesced all-reduce (a tuple), an
    # all-gather, a reduce-scatter, and an all-gather that has a channel id already.
    def collectives():
        a, b = torch.ones(3, device=device), torch.zeros(2, 2, device=device)
        _XLAC._xla_all_reduce_inplace(xm.REDUCE_SUM, [a, b], 1.0, [], True)
        gathered = _XLAC._xla_all_gather(a, 0, 2, [], False, None, None)
        token, _ = xm._get_all_reduce_token()
        scattered, _ = _XLAC._xla_reduce_scatter(xm.REDUCE_SUM, b.reshape(4), token, 1.0, 0, 2, [], False, None,
                                                 None)
        channeled = _XLAC._xla_all_gather(scattered, 0, 2, [[0, 1]], False, 7, True)
        return gathered, channeled

    write("torch_int64.pb", hlo(long_arithmetic()))
    write("torch_nonzero.pb", hlo(nonzero()))
    write("torch_gather_rank0.pb", hlo(gather_as_rank(0)))
    write("torch_gather_rank1.pb", hlo(gather_as_rank(1)))
    write("torch_collectives.pb", hlo(*collectives(), last=True))


# ---------------------------------------------------------------- driver

_TORCH_ENV = {"PJRT_DEVICE": "CPU", "XLA_IR_DEBUG": "1", "XLA_HLO_DEBUG": "1", "XLA_EXPERIMENTAL": "nonzero"}
_SCRUBBED = ("JAX_PLATFORMS", "JAX_ENABLE_X64", "XLA_FLAGS", "XLA_USE_BF16", "XLA_USE_32BIT_LONG",
             "XLA_DOWNCAST_BF16", "PJRT_DEVICE", "CPU_NUM_DEVICES", "PJRT_CAPI_HEADER")

if __name__ == "__main__":
    data = Path(__file__).resolve().parent
    base = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    for part, env in [("jax", {}), ("options", {}), ("torch", _TORCH_ENV)]:
        run = f"import runpy; runpy.run_path('make_programs.py', run_name='write_{part}')"
        subprocess.run([sys.executable, "-c", run], cwd=data, env={**base, "TF_CPP_MIN_LOG_LEVEL": "2", **env},
                       check=True)
elif __name__ == "write_jax":
    write_jax_programs()
elif __name__ == "write_options":
    write_options()
elif __name__ == "write_torch":
    write_torch_programs()
