"""One small jitted JAX function per construct the Trainium analysis looks for.

The op each case is about sits on the line marked `# case: <name>`; tests/test_compat.py finds
the line by that marker and expects the finding there. Cases marked `# clean: <name>` must
produce no finding. Prints one `RESULT {json}` line per case.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

X = jnp.arange(1.0, 5.0, dtype=jnp.float32)
K = jnp.array([3, 1, 2, 1], dtype=jnp.int32)


def complex_multiply(x):
    return (x.astype(jnp.complex64) * (1 + 2j)).real  # case: complex


def fp8_e4m3fnuz(x):
    return x.astype(jnp.float8_e4m3fnuz).astype(jnp.float32)  # case: fp8-e4m3fnuz


def fp8_e5m2fnuz(x):
    return x.astype(jnp.float8_e5m2fnuz).astype(jnp.float32)  # case: fp8-e5m2fnuz


def fp8_e4m3b11fnuz(x):
    return x.astype(jnp.float8_e4m3b11fnuz).astype(jnp.float32)  # case: fp8-e4m3b11fnuz


def fp8_e3m4(x):
    return x.astype(jnp.float8_e3m4).astype(jnp.float32)  # case: fp8-e3m4


def fp8_e8m0fnu(x):
    return x.astype(jnp.float8_e8m0fnu).astype(jnp.float32)  # case: fp8-e8m0fnu


def fp8_e4m3fn(x):
    return x.astype(jnp.float8_e4m3fn).astype(jnp.float32)  # clean: fp8-e4m3fn


def fp8_e5m2(x):
    return x.astype(jnp.float8_e5m2).astype(jnp.float32)  # clean: fp8-e5m2


def data_dependent_cond(x):
    return lax.cond(x.sum() > 0, lambda v: v + 1, lambda v: v * 3, x)  # case: cond


def data_dependent_while(x):
    return lax.while_loop(lambda v: v.sum() < 100, lambda v: v * 2, x)  # case: while


def fixed_fori_loop(x):
    return lax.fori_loop(0, 5, lambda i, v: jnp.sin(v) + i, x)  # clean: fori


def integer_matmul(k):
    a = k.reshape(2, 2)
    return a @ a  # case: integer-dot


def argmax(x):
    return jnp.argmax(x * 2)  # case: argmax


def two_key_sort(k):
    return lax.sort((k, k * 2), num_keys=2)[0]  # case: sort-two-keys


def plain_sort(k):
    return jnp.sort(k)  # clean: sort


def host_callback(x):
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return jax.pure_callback(lambda a: np.asarray(a) + 1, out, x)  # case: callback


def debug_callback(x):
    jax.debug.callback(lambda a: None, x)  # case: debug-callback
    return x + 1


CASES = [
    ("complex", complex_multiply, X),
    ("fp8-e4m3fnuz", fp8_e4m3fnuz, X),
    ("fp8-e5m2fnuz", fp8_e5m2fnuz, X),
    ("fp8-e4m3b11fnuz", fp8_e4m3b11fnuz, X),
    ("fp8-e3m4", fp8_e3m4, X),
    ("fp8-e8m0fnu", fp8_e8m0fnu, X),
    ("fp8-e4m3fn", fp8_e4m3fn, X),
    ("fp8-e5m2", fp8_e5m2, X),
    ("cond", data_dependent_cond, X),
    ("while", data_dependent_while, X),
    ("fori", fixed_fori_loop, X),
    ("integer-dot", integer_matmul, K),
    ("argmax", argmax, X),
    ("sort-two-keys", two_key_sort, K),
    ("sort", plain_sort, K),
    ("callback", host_callback, X),
    ("debug-callback", debug_callback, X),
]


def run(name, fn, *args):
    result = {"case": name}
    try:
        compiled = jax.jit(fn).lower(*args).compile()
        out = compiled(*args)
        result["ok"] = True
        result["value"] = np.asarray(out).astype(np.float64).tolist()
        # Whether the compiled program still has a loop (XLA may unroll a short fixed one).
        result["compiled_has_while"] = " while(" in compiled.as_text()
    except Exception as e:  # noqa: BLE001 - reported to the test
        result.update(ok=False, type=type(e).__name__, error=str(e))
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    for case in CASES:
        run(*case)
