"""`pjrt-neuron selftest`: a fixed battery of checks on whatever engine is active, printed as a
report (or JSON) to paste into a bug report.

The checks run through JAX in a child process, one JSON line per check as it finishes, so a
crash in the plugin or the runtime still leaves a report: the checks done so far, and the
child's exit status and last lines of stderr.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

from pjrt_neuron.tables import Column, format_table

CHECK_PREFIX = "PJRT_NEURON_SELFTEST "
# Every element type a NeuronCore might store; the engine refuses the others with UNIMPLEMENTED.
ELEMENT_TYPES = ("float32", "bfloat16", "float16", "float64", "float8_e4m3fn", "float8_e5m2", "int8", "int16",
                 "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "complex64")
INSTALL_JAX = "pip install 'jax==0.10.*'"


class Skip(Exception):
    """The check does not apply here; the message says why."""


# ---------------------------------------------------------------- the child: the checks


def _emit(record: dict) -> None:
    sys.stdout.write(CHECK_PREFIX + json.dumps(record) + "\n")
    sys.stdout.flush()


def _run_check(name: str, check) -> None:
    started = time.monotonic()
    record = {"name": name, "status": "pass", "error": "", "details": {}}
    try:
        record["details"] = check() or {}
    except Skip as reason:
        record.update(status="skip", error=str(reason))
    except Exception as error:  # noqa: BLE001 - the report carries every failure
        record.update(status="fail", error=f"{type(error).__name__}: {error}")
    record["seconds"] = round(time.monotonic() - started, 3)
    _emit(record)


def _expect_equal(got, want, what: str) -> None:
    import numpy as np

    if not np.array_equal(np.asarray(got), np.asarray(want)):
        raise AssertionError(f"{what}: got {np.asarray(got).tolist()}, expected {np.asarray(want).tolist()}")


def _child() -> int:
    os.environ["JAX_PLATFORMS"] = "neuron"
    import jax

    jax.config.update("jax_enable_x64", True)  # so int64 and float64 reach the device as they are
    import jax.numpy as jnp
    import ml_dtypes
    import numpy as np

    devices = []

    def cores():
        devices.extend(jax.devices("neuron"))
        stats = [d.memory_stats() or {} for d in devices]
        _emit({"client": {"platform_version": devices[0].client.platform_version.replace("\n", "; "),
                          "jax_version": jax.__version__}})
        return {"cores": len(devices), "device_kind": devices[0].device_kind,
                "hbm_bytes_per_core": [s.get("bytes_limit") for s in stats]}

    _run_check("list_cores", cores)
    if not devices:
        return 1
    first = devices[0]

    def round_trip(dtype_name):
        def check():
            dtype = np.dtype(getattr(ml_dtypes, dtype_name, None) or dtype_name)
            values = (np.arange(24) % 7 - 3).reshape(2, 3, 4)
            if dtype.kind == "u" or dtype == np.bool_:
                values = np.abs(values)
            values = values.astype(dtype)
            try:
                on_device = jax.device_put(values, first)
                back = np.asarray(on_device)
            except Exception as error:  # noqa: BLE001
                if "UNIMPLEMENTED" in str(error):
                    raise Skip(f"the engine does not store {dtype_name}: {error}") from None
                raise
            if back.dtype != dtype:
                raise AssertionError(f"came back as {back.dtype}")
            _expect_equal(back.view(np.uint8), values.view(np.uint8), f"{dtype_name} bytes")
            return {}
        return check

    for dtype_name in ELEMENT_TYPES:
        _run_check(f"round_trip_{dtype_name}", round_trip(dtype_name))

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)

    def add():
        _expect_equal(jax.jit(lambda x, y: x + y)(jax.device_put(a, first), jax.device_put(a * 10, first)),
                      a * 11, "a + 10a")

    def matmul():
        got = np.asarray(jax.jit(lambda x, y: x @ y)(jax.device_put(a, first), jax.device_put(b, first)))
        np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)

    def donated_update():
        step = jax.jit(lambda w, g: w - 0.5 * g, donate_argnums=0)
        w = jax.device_put(a, first)
        updated = step(w, jax.device_put(a * 2, first))
        _expect_equal(updated, a - a, "w - 0.5 * 2w")
        if not w.is_deleted():
            raise AssertionError("the donated input is still alive")

    def all_reduce():
        if len(devices) < 2:
            raise Skip(f"needs 2 NeuronCores, {len(devices)} visible")
        # A replicated program (num_replicas=2, as pmap was and torch-xla's DDP is); sharded
        # programs (several partitions) are the next check.
        from jax._src import xla_bridge
        from jax._src.lib import xla_client

        module = """module @selftest_all_reduce attributes {mhlo.num_replicas = 2 : i32, mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}"""
        options = xla_client.CompileOptions()
        options.num_replicas, options.num_partitions = 2, 1
        options.device_assignment = xla_client.DeviceAssignment.create(np.array([[0], [1]]))
        pair = devices[:2]
        executable = xla_bridge.get_backend("neuron").compile_and_load(
            module, xla_client.DeviceList(tuple(pair)), options)
        x = np.array([1, 2], np.float32)
        shards = [jax.device_put(x, pair[0]), jax.device_put(x * 10, pair[1])]
        mesh = jax.sharding.Mesh(np.array(pair), ("r",))
        arg = jax.make_array_from_single_device_arrays(
            (4,), jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("r")), shards)
        outs = executable.execute_sharded([arg]).disassemble_into_single_device_arrays()[0]
        for core, out in enumerate(outs):
            _expect_equal(out, x * 11, f"all-reduce on core {core}")

    def sharded_jit():
        if len(devices) < 2:
            raise Skip(f"needs 2 NeuronCores, {len(devices)} visible")
        # Several partitions: split by XLA's SPMD partitioner, the product summed across cores.
        mesh = jax.sharding.Mesh(np.array(devices[:2]), ("x",))
        spec = jax.sharding.PartitionSpec
        x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
        w = np.linspace(2, -2, 48, dtype=np.float32).reshape(8, 6)
        on = (jax.device_put(x, jax.sharding.NamedSharding(mesh, spec(None, "x"))),
              jax.device_put(w, jax.sharding.NamedSharding(mesh, spec("x", None))))
        out = jax.jit(lambda a, b: a @ b)(*on)
        np.testing.assert_allclose(np.asarray(out), x @ w, rtol=1e-5, atol=1e-5, err_msg="sharded x @ w")

    def over_hbm():
        limit = (first.memory_stats() or {}).get("bytes_limit")
        if not limit:
            raise Skip("the device reports no bytes_limit")
        rows = limit // (1 << 20) + 1  # MiB rows: no dimension beyond what a compiler takes
        too_big = rows << 20
        try:
            jax.jit(lambda: jnp.zeros((rows, 1 << 20), jnp.uint8)).lower().compile()().block_until_ready()
        except Exception as error:  # noqa: BLE001
            if "RESOURCE_EXHAUSTED" not in str(error):
                raise AssertionError(f"failed, but not with RESOURCE_EXHAUSTED: {error}") from None
            message = str(error)
        else:
            raise AssertionError(f"{too_big} bytes on a core of {limit} bytes of HBM did not fail")
        _expect_equal(jax.jit(lambda x: x * 2)(jax.device_put(a, first)), a * 2, "a run after the failure")
        return {"requested_bytes": too_big, "hbm_bytes": limit, "message": message[:500]}

    for name, check in (("add", add), ("matmul", matmul), ("donated_update", donated_update),
                        ("all_reduce_two_cores", all_reduce), ("sharded_jit_two_cores", sharded_jit),
                        ("over_hbm_allocation", over_hbm)):
        _run_check(name, check)
    return 0


# ---------------------------------------------------------------- the parent: the report


def _header() -> dict:
    from pjrt_neuron import __version__, _native

    header = {"plugin_version": __version__, "python_version": platform.python_version(),
              "platform": platform.platform(), "jax_version": None}
    try:
        header["library_version"] = _native.version()
        header.update(_native.engine_report(with_memory=False))
    except Exception as error:  # noqa: BLE001 - a broken install is what the report is for
        header["library_error"] = str(error)
    try:
        import jax
        import jaxlib

        header["jax_version"], header["jaxlib_version"] = jax.__version__, jaxlib.__version__
    except ImportError:
        pass
    return header


def run() -> dict:
    """Runs the battery; the report: header, checks, passed (every check passed or skipped)."""
    report = {"header": _header(), "checks": [], "passed": False}
    if report["header"]["jax_version"] is None:
        report["error"] = f"pjrt-neuron selftest runs its checks through JAX, which is not installed: {INSTALL_JAX}"
        return report
    child = subprocess.run([sys.executable, "-m", "pjrt_neuron.selftest", "--child"], capture_output=True,
                           text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")))
    for line in child.stdout.splitlines():
        if not line.startswith(CHECK_PREFIX):
            continue
        record = json.loads(line[len(CHECK_PREFIX):])
        if "client" in record:
            report["header"].update(record["client"])
        else:
            report["checks"].append(record)
    if child.returncode != 0 or not report["checks"]:
        report["checks"].append({"name": "checks_process", "status": "fail", "seconds": 0.0, "details": {},
                                 "error": f"the checks' process exited with status {child.returncode}; "
                                          f"its stderr ends with:\n{child.stderr[-3000:]}"})
    report["passed"] = all(c["status"] in ("pass", "skip") for c in report["checks"])
    return report


CHECK_COLUMNS = [Column("status", "<", 4), Column("check", "<", 24), Column("seconds", ">", 8), Column("details")]


def _check_row(c: dict) -> list[str]:
    details = []
    if c["name"] == "list_cores" and c["status"] == "pass":
        d = c["details"]
        details.append(f"{d['cores']} core(s), {d['device_kind']}, HBM {d['hbm_bytes_per_core']}")
    if c["error"]:
        details.append(c["error"].replace("\n", "\n      "))
    return [c["status"].upper(), c["name"], f"{c['seconds']:.3f}s", "  ".join(details)]


def format_text(report: dict) -> str:
    h = report["header"]
    lines = ["pjrt-neuron selftest", f"  plugin: {h.get('plugin_version')} (library {h.get('library_version', '?')})",
             f"  engine: {h.get('engine', '?')}"]
    if h.get("engine") == "neuron":
        lines += [f"  runtime: {h.get('runtime_version', h.get('runtime_version_error', h.get('runtime_error', '?')))}"
                  f" ({h.get('neuron_library')})",
                  f"  compiler: {h.get('compiler_version', h.get('compiler_error', '?'))} ({h.get('neuronx_cc')})",
                  f"  instance family: {h.get('instance_family', h.get('instance_error', '?'))}, "
                  f"visible cores: {h.get('visible_cores', '?')} of {h.get('total_cores', '?')}"]
    elif h.get("neuron_unavailable"):
        lines.append(f"  (not neuron: {h['neuron_unavailable']})")
    for key in ("engine_error", "settings_error", "library_error"):
        if h.get(key):
            lines.append(f"  {key}: {h[key]}")
    lines += [f"  platform version: {h.get('platform_version', '?')}",
              f"  python {h.get('python_version')}, jax {h.get('jax_version') or 'not installed'}, "
              f"jaxlib {h.get('jaxlib_version', '?')}; {h.get('platform')}"]
    if report.get("error"):
        lines.append(f"ERROR: {report['error']}")
    lines += format_table(CHECK_COLUMNS, [_check_row(c) for c in report["checks"]], gap="  ", header=False)
    counts = {s: sum(c["status"] == s for c in report["checks"]) for s in ("pass", "fail", "skip")}
    lines.append(f"{'PASSED' if report['passed'] else 'FAILED'}: {counts['pass']} passed, {counts['fail']} failed, "
                 f"{counts['skip']} skipped")
    return "\n".join(lines)


def main(as_json: bool) -> int:
    report = run()
    print(json.dumps(report, indent=2) if as_json else format_text(report))
    if report.get("error"):
        return 3
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        sys.exit(_child())
    sys.exit(main("--json" in sys.argv[1:]))
