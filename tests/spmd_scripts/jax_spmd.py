"""Runs every check of jax_checks.py on all devices of the first platform in JAX_PLATFORMS,
under both partitioners, and prints the report as JSON on the last line.

- NeuronCores: JAX_PLATFORMS=neuron,cpu PJRT_NEURON_INSTANCE_TYPE=trn1.32xlarge
  (cpu is needed too: the training check's unsharded reference runs on one CPU device);
- reference:   JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=N
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax  # noqa: E402

import jax_checks  # noqa: E402

if __name__ == "__main__":
    platform = os.environ["JAX_PLATFORMS"].split(",")[0]
    devices = jax.devices(platform)
    print(jax_checks.dumps(jax_checks.run_everything(devices)))
