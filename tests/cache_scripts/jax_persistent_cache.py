"""JAX's own persistent compilation cache on NEURON devices.

Usage: python jax_persistent_cache.py CACHE_DIR
Runs a few jitted functions on the first NEURON device with JAX's compilation cache in
CACHE_DIR and prints one JSON line: the results, JAX's cache-related log lines and the
plugin's compile counters for this process. Run twice: the second run should load every
executable from JAX's cache (the plugin compiles nothing).
"""

import json
import logging
import sys

import jax
import jax.numpy as jnp
import numpy as np

cache_dir = sys.argv[1]
jax.config.update("jax_compilation_cache_dir", cache_dir)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

# JAX says at DEBUG level why it does or does not use the cache; keep those lines.
log_lines = []


class _Keep(logging.Handler):
    def emit(self, record):
        message = record.getMessage()
        if "persistent compilation cache" in message.lower() or "not writing" in message.lower():
            log_lines.append(message)


for name in ("jax._src.compiler", "jax._src.compilation_cache", "jax._src.cache_key"):
    logger = logging.getLogger(name)
    logger.setLevel(logging.DEBUG)
    logger.addHandler(_Keep())

device = jax.devices("neuron")[0]
x = jax.device_put(np.arange(12, dtype=np.float32).reshape(3, 4), device)


@jax.jit
def affine(a):
    return jnp.sin(a) * 2.0 + 1.0


@jax.jit
def gram(a):
    return (a @ a.T).sum(axis=1)


results = {"affine": np.asarray(affine(x)).tolist(), "gram": np.asarray(gram(x)).tolist()}
host = np.arange(12, dtype=np.float32).reshape(3, 4)
expected = {"affine": (np.sin(host) * 2.0 + 1.0).tolist(), "gram": (host @ host.T).sum(axis=1).tolist()}

from pjrt_neuron import cache  # noqa: E402  (after jax loaded the plugin)

print(json.dumps({
    "platform": device.platform,
    "results": results,
    "expected": expected,
    "log": log_lines,
    "plugin_metrics": cache.metrics(),
}))
