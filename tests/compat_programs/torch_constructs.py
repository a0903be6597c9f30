"""Runs the torch-xla construct programs named on the command line (torch_<name>.py in this
folder, each with the offending lines marked `# case: <name>`) in one process, since importing
torch_xla is slow. Prints one `RESULT {json}` line per program."""

import importlib
import json
import sys
from pathlib import Path

import torch_xla

sys.path.insert(0, str(Path(__file__).resolve().parent))

if __name__ == "__main__":
    device = torch_xla.device()
    for name in sys.argv[1:]:
        result = {"program": name}
        try:
            result.update(ok=True, **importlib.import_module(f"torch_{name}").run(device))
        except Exception as e:  # noqa: BLE001 - reported to the test
            result.update(ok=False, type=type(e).__name__, error=str(e))
        print("RESULT " + json.dumps(result), flush=True)
