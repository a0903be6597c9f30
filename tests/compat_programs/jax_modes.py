"""Runs the named cases in order in one process and prints `RESULT {json}` per case, so a test
can see what each compilation did under the PJRT_NEURON_COMPAT* settings it was started with.

    python jax_modes.py CASE... [--exit N]

Cases: float64 (an f64 op, on line `# case: float64`), float64-again (the same function at a
new shape: a second program with the same source line), int64 (int64 arithmetic within the
int32 range, line `# case: int64`), int64-large (int64 values beyond it, `# case: int64-large`),
clean and clean-again (float32 only, each a new program).
"""

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)


def scale64(x):
    return x.astype(jnp.float64) * 2.5  # case: float64


def widen(x):
    return x.astype(jnp.int64) * 3 + 7  # case: int64


def widen_large(x):
    return x.astype(jnp.int64) * 2**40  # case: int64-large


def clean(x):
    return jnp.tanh(x) * 2.0


def clean_again(x):
    return jnp.sum(x * x)


X4 = np.arange(1.0, 5.0, dtype=np.float32)
X8 = np.arange(1.0, 9.0, dtype=np.float32)

CASES = {
    "float64": (scale64, X4, X4.astype(np.float64) * 2.5),
    "float64-again": (scale64, X8, X8.astype(np.float64) * 2.5),
    "int64": (widen, X4, X4.astype(np.int64) * 3 + 7),
    "int64-large": (widen_large, X4, X4.astype(np.int64) * 2**40),
    "clean": (clean, X4, np.tanh(X4) * 2.0),
    "clean-again": (clean_again, X8, np.sum(X8 * X8)),
}


def run(name):
    fn, x, want = CASES[name]
    result = {"case": name}
    try:
        got = np.asarray(jax.jit(fn)(x))
        result.update(ok=True, dtype=str(got.dtype), correct=bool(np.allclose(got, want, rtol=1e-6)),
                      platform=jax.devices()[0].platform)
    except Exception as e:  # noqa: BLE001 - reported to the test
        result.update(ok=False, type=type(e).__name__, error=str(e))
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    exit_code = 0
    if "--exit" in args:
        i = args.index("--exit")
        exit_code = int(args[i + 1])
        del args[i:i + 2]
    for case in args:
        run(case)
    sys.exit(exit_code)
