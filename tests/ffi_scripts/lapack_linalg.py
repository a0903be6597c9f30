"""JAX's LAPACK-only linear algebra (eigh, svd through eigh, eig, schur) on `cpu` and `neuron`.
Prints one JSON line: {name: {"cpu": [...], "neuron": [...] or {"error": ...}}}.
"""

import json

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np

rng = np.random.default_rng(0)
a = rng.standard_normal((6, 6)).astype(np.float32)
symmetric = a @ a.T + 6 * np.eye(6, dtype=np.float32)
cases = {
    "eigh_values": lambda x: jnp.linalg.eigh(x)[0],
    "svd_values": lambda x: jnp.linalg.svd(x, compute_uv=False),
    "eig_magnitudes": lambda x: jnp.sort(jnp.abs(jnp.linalg.eigvals(x))),
    "schur_diagonal": lambda x: jnp.sort(jnp.diagonal(jax.scipy.linalg.schur(x)[0])),
}
out = {}
for name, f in cases.items():
    out[name] = {}
    for platform in ("cpu", "neuron"):
        try:
            value = jax.jit(f)(jax.device_put(symmetric if name != "eig_magnitudes" else a, jax.devices(platform)[0]))
            out[name][platform] = np.asarray(value).tolist()
        except Exception as error:  # noqa: BLE001 - the test reads the message
            out[name][platform] = {"error": type(error).__name__, "message": str(error)[:2000]}
print(json.dumps(out))
