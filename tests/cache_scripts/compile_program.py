"""Compiles one program through the plugin's C API in a process of its own, then runs it.

Usage: python compile_program.py PROGRAM_FILE INPUT_NPY [--go FILE] [--format mlir|hlo]

Prints "ready" once the client exists, waits for the file given with --go to appear (a
barrier, so several processes compile at the same moment), prints "compiling" just before
PJRT_Client_Compile, and at the end one JSON line: the output of running the program on
the input, the plugin's compile counters for this process, the compile call's wall time,
or the error. The compile cache and lock directory come from the environment.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pjrt_neuron  # noqa: E402

pjrt_neuron.prepare_environment()

import pjrt_capi as P  # noqa: E402
from pjrt_neuron import cache  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("program")
parser.add_argument("input")
parser.add_argument("--go")
parser.add_argument("--format", default="mlir")
args = parser.parse_args()

code = Path(args.program).read_bytes()
x = np.load(args.input)
client = P.Client(P.Api(pjrt_neuron.library_path()))
print("ready", flush=True)
if args.go:
    while not os.path.exists(args.go):
        time.sleep(0.005)
print("compiling", flush=True)
result = {}
start = time.monotonic()
try:
    executable = client.compile(code, args.format)
    result["compile_wall_seconds"] = time.monotonic() - start
    (outputs,) = executable.execute([client.buffer_from_numpy(x)])
    result["output"] = outputs[0].to_numpy().tolist()
except P.PjrtError as error:
    result["error"] = {"code": error.code_name, "message": error.message}
result["metrics"] = cache.metrics()
print(json.dumps(result), flush=True)
client.close()
