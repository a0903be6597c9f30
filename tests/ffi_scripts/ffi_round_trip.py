"""A jax.ffi handler from a shared library, registered for `cpu` and `neuron`, called in a jitted
program on each. Prints one JSON line: {"cpu": [...], "neuron": [...] or {"error", "message"},
"platform_version": ...}.

Usage: python ffi_round_trip.py LIBRARY
"""

import ctypes
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

library = ctypes.CDLL(sys.argv[1])
capsule = jax.ffi.pycapsule(library.pjrt_neuron_test_twice_plus_one)
jax.ffi.register_ffi_target("pjrt_neuron_test_twice_plus_one", capsule, platform="cpu")
jax.ffi.register_ffi_target("pjrt_neuron_test_twice_plus_one", capsule, platform="neuron")


def twice_plus_one(x):
    return jax.ffi.ffi_call("pjrt_neuron_test_twice_plus_one", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


f = jax.jit(lambda x: twice_plus_one(jnp.sin(x)) - 1.0)
x = np.linspace(-2.0, 3.0, 12, dtype=np.float32).reshape(3, 4)
out = {"platform_version": jax.devices("neuron")[0].client.platform_version}
for platform in ("cpu", "neuron"):
    try:
        out[platform] = np.asarray(f(jax.device_put(x, jax.devices(platform)[0]))).tolist()
    except Exception as e:  # noqa: BLE001 - the error is the result
        out[platform] = {"error": type(e).__name__, "message": str(e)[:800]}
print(json.dumps(out))
