"""torch-xla's profiler on the XLA device chosen by PJRT_DEVICE: a few steps under
xp.start_trace/stop_trace, then the trace's device planes and their events.

Prints {"device_type", "files", "planes": {plane name: [event names]}} as JSON on the last line.
"""

import glob
import json
import sys
import tempfile

import torch
import torch_xla
import torch_xla.debug.profiler as xp
import torch_xla.runtime as xr


def main():
    device = torch_xla.device()
    x = torch.randn(32, 32).to(device)
    torch_xla.sync()
    logdir = tempfile.mkdtemp()
    xp.start_trace(logdir)
    for _ in range(3):
        x = torch.tanh(x @ x.T) * 0.5
        torch_xla.sync()
    x.cpu()
    xp.stop_trace()
    files = glob.glob(logdir + "/**/*.xplane.pb", recursive=True)
    planes = {}
    if files:
        from jax.profiler import ProfileData  # reads the XSpace without TensorBoard

        for plane in ProfileData.from_file(files[0]).planes:
            if plane.name.startswith("/device:"):
                planes[plane.name] = [e.name for line in plane.lines for e in line.events]
    print(json.dumps({"device_type": xr.device_type(), "files": len(files), "planes": planes}))


if __name__ == "__main__":
    sys.exit(main())
