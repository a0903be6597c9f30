"""Create a pjrt-neuron client (claiming NeuronCores) and report what it got, as one JSON line.

    python claim_cores.py [--hold] [OPTIONS_JSON]

OPTIONS_JSON is a dict of PJRT create options (default: none); the environment
(PJRT_NEURON_INSTANCE_TYPE, NEURON_RT_VISIBLE_CORES, NEURON_RT_NUM_CORES,
NEURON_LOGICAL_NC_CONFIG, PJRT_NEURON_LOCK_DIR) applies as usual.  Prints
{"pid", "devices": [{"id", "local_hardware_id", "kind", "attributes"}]} or
{"pid", "error": {"code", "message"}}.  With --hold, a client that was created
keeps its cores until stdin is closed (or the process is killed).
"""

import json
import os
import sys
from pathlib import Path

# ml_dtypes costs ~1.5 s to import and no test here needs bf16/fp8 buffers.
sys.modules["ml_dtypes"] = None
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pjrt_neuron  # noqa: E402

pjrt_neuron.prepare_environment()

import pjrt_capi as P  # noqa: E402


def main() -> int:
    args = sys.argv[1:]
    hold = "--hold" in args
    args = [a for a in args if a != "--hold"]
    options = json.loads(args[0]) if args else {}
    api = P.Api(pjrt_neuron.library_path())
    report = {"pid": os.getpid()}
    try:
        client = P.Client(api, options)
    except P.PjrtError as err:
        report["error"] = {"code": err.code_name, "message": err.message}
        print(json.dumps(report), flush=True)
        return 0
    report["devices"] = [
        {"id": d.id, "local_hardware_id": d.local_hardware_id, "kind": d.kind, "attributes": d.attributes()}
        for d in client.devices()
    ]
    print(json.dumps(report), flush=True)
    if hold:
        sys.stdin.read()  # until the test closes our stdin
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
