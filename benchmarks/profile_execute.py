"""Per-call cost of PJRT_LoadedExecutable_Execute, pjrt-neuron against the stock XLA CPU plugin.

Drives each plugin through its C API (tests/pjrt_capi.py sets up the client, the program and
the arguments; profile_execute_loop.c runs the loop), so nothing of a framework is measured.
A program with N f32[8] arguments returns each plus one.

Wall clock, both plugins, medians of repeats:
    python benchmarks/profile_execute.py --args 1,16,128
Instructions per call and the top functions, under callgrind (valgrind), which counts
instructions exactly where wall time on a shared 2-core machine is noisy:
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.%p \\
        python benchmarks/profile_execute.py --plugin neuron --args 1 --callgrind
    callgrind_annotate --inclusive=no /tmp/cg.<pid>.1 | head -40
The same for a jitted JAX function (what a JAX user's dispatch costs, framework included), one
plugin per run, instructions of the calling thread only (the files ending in -01):
    valgrind --tool=callgrind --separate-threads=yes --instr-atstart=no --callgrind-out-file=/tmp/cgj \\
        python benchmarks/profile_execute.py --jax --plugin neuron --args 1 --callgrind
Benchmarks report; they never assert times.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

import pjrt_capi  # noqa: E402


def program(num_args: int) -> str:
    params = ", ".join(f"%a{i}: tensor<8xf32>" for i in range(num_args))
    results = ", ".join(["tensor<8xf32>"] * num_args)
    body = "\n".join(f"  %r{i} = stablehlo.add %a{i}, %one : tensor<8xf32>" for i in range(num_args))
    returned = ", ".join(f"%r{i}" for i in range(num_args))
    return (f"func.func @main({params}) -> ({results}) {{\n"
            "  %one = stablehlo.constant dense<1.0> : tensor<8xf32>\n"
            f"{body}\n  return {returned} : {results}\n}}")


def build_loop() -> ctypes.CDLL:
    out = Path(tempfile.mkdtemp(prefix="pjrt-profile-")) / "loop.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", f"-I{pjrt_capi.header_path().parent}",
                    str(HERE / "profile_execute_loop.c"), "-o", str(out)], check=True)
    lib = ctypes.CDLL(str(out))
    lib.instrument_stop.argtypes = [ctypes.c_char_p]
    lib.run_execute_loop.restype = ctypes.c_double
    lib.run_execute_loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                     ctypes.c_size_t, ctypes.c_long, ctypes.c_int]
    return lib


def plugin_path(name: str) -> str:
    if name == "stock":
        return str(pjrt_capi.cpu_plugin_path())
    from pjrt_neuron import config
    config.prepare_environment()  # what the JAX and torch-xla entry points do: finds the engine
    return config.library_path()


class Setup:
    """A client of one plugin with a compiled N-argument program and its arguments."""

    def __init__(self, name: str, num_args: int):
        self.api = pjrt_capi.Api(plugin_path(name))
        self.client = self.api.create_client()
        self.executable = self.client.compile(program(num_args))
        self.buffers = [self.client.buffer_from_numpy(np.full((8,), i, np.float32)) for i in range(num_args)]
        self.pointers = (ctypes.c_void_p * num_args)(*[b.ptr for b in self.buffers])
        self.num_args = num_args

    def run(self, lib, iterations: int, instrument: bool = False) -> float:
        seconds = lib.run_execute_loop(self.api.address, self.executable.ptr, self.pointers, self.num_args,
                                       self.num_args, iterations, int(instrument))
        if seconds < 0:
            sys.exit("the execute loop failed (see above)")
        return seconds


def jax_dispatch(lib, plugin: str, counts, calls: int, callgrind: bool) -> None:
    """A jitted N-argument function on one plugin's first device, dispatched and awaited."""
    platform = "neuron" if plugin == "neuron" else "stockcpu"
    os.environ["JAX_PLATFORMS"] = platform
    if plugin == "stock":
        from jax._src import xla_bridge
        xla_bridge.register_plugin(platform, priority=0, library_path=plugin_path("stock"), options=None)
    import time

    import jax
    device = jax.devices(platform)[0]
    for count in counts:
        placed = [jax.device_put(np.full((8,), i, np.float32), device) for i in range(count)]
        jitted = jax.jit(lambda *xs: tuple(x + 1 for x in xs))
        for _ in range(20):
            jax.block_until_ready(jitted(*placed))
        number = calls or max(50, 4000 // count)
        if callgrind:
            lib.instrument_start()
        start = time.perf_counter()
        for _ in range(number):
            jax.block_until_ready(jitted(*placed))
        seconds = (time.perf_counter() - start) / number
        if callgrind:
            lib.instrument_stop(f"jax dispatch {count}".encode())
        print(f"jax dispatch, {plugin}, {count:3d} argument(s): {seconds * 1e6:.2f} us a call over {number} calls",
              flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plugin", choices=("both", "neuron", "stock"), default="both")
    parser.add_argument("--args", default="1,16,128", help="argument counts")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=0, help="calls per repeat (default: by argument count)")
    parser.add_argument("--callgrind", action="store_true",
                        help="one instrumented loop per plugin and count (run under valgrind --tool=callgrind)")
    parser.add_argument("--jax", action="store_true",
                        help="dispatch a jitted JAX function instead of calling the C API (one plugin a run)")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    lib = build_loop()
    if args.jax:
        if args.plugin == "both":
            sys.exit("--jax profiles one plugin a run: --plugin neuron or --plugin stock")
        jax_dispatch(lib, args.plugin, [int(c) for c in args.args.split(",")], args.iterations, args.callgrind)
        return 0
    names = ("stock", "neuron") if args.plugin == "both" else (args.plugin,)
    for count in (int(c) for c in args.args.split(",")):
        setups = {name: Setup(name, count) for name in names}
        iterations = args.iterations or max(20, 4000 // count)
        for setup in setups.values():
            setup.run(lib, max(5, iterations // 10))  # warm up
        if args.callgrind:
            for name, setup in setups.items():
                setup.run(lib, iterations, instrument=True)
                print(f"{name}: {count} argument(s), {iterations} calls instrumented", flush=True)
            continue
        samples = {name: [] for name in names}
        for _ in range(args.repeats):
            for name, setup in setups.items():  # alternating, so drifts in machine load hit both
                samples[name].append(setup.run(lib, iterations))
        medians = {name: statistics.median(s) for name, s in samples.items()}
        cells = "   ".join(f"{name} {t * 1e6:8.2f} us" for name, t in medians.items())
        ratio = f"   ratio {medians['neuron'] / medians['stock']:.2f}" if len(names) == 2 else ""
        print(f"execute, {count:3d} argument(s) and result(s): {cells}{ratio}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
