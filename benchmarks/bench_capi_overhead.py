"""pjrt-neuron against the stock XLA CPU plugin, both through the PJRT C API, in one process.

bench_foundation.py compares with JAX's built-in CPU backend, which does not go through the C
API at all. Here the stock xla_cpu_pjrt.so (the xla-cpu-pjrt wheel, the engine the simulator
wraps) is registered as a JAX plugin of its own, platform `stockcpu`, beside `neuron`, so a ratio
is what this plugin adds on top of the engine it wraps:

- dispatch of a jitted function with 1, 16 and 128 small arguments and as many results;
- one step of a small MLP's SGD training (forward, backward, update);
- host-to-device (device_put) and device-to-host (np.asarray) of 1, 16 and 256 MiB, each also
  against a plain memcpy of the same size into fresh memory (what memory allows);
- the same for torch-xla, one process per device type (torch-xla has one per process), where it
  can load the stock plugin as device type STOCKCPU; torch-xla 2.9 cannot (it sends a shorter
  PJRT_ExecuteOptions than the stock plugin accepts), and then its built-in CPU backend is the
  reference, labelled as such.

Measurements of the two plugins alternate, and each figure is the median of the repeats.
Benchmarks report; they never assert times.
Run: python benchmarks/bench_capi_overhead.py [--quick] [--no-torch]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STOCK = "stockcpu"
MIB = 1 << 20


def stock_library() -> str:
    sys.path.insert(0, str(REPO))
    from pjrt_neuron import config
    return config.engine_library_path()


def alternate(fns: dict, repeats: int, number: int) -> dict:
    """Median seconds per call of each fn; one run of `number` calls per fn per round, fns alternating."""
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(number):
                fn()
            samples[name].append((time.perf_counter() - start) / number)
    return {name: statistics.median(s) for name, s in samples.items()}


def alternate_prepared(fns: dict, repeats: int) -> dict:
    """Like alternate, for fns that return (prepare, timed): only timed() is measured, once per round."""
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            timed = fn()
            start = time.perf_counter()
            timed()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) for name, s in samples.items()}


def fresh_memcpy(nbytes: int):
    import numpy as np
    source = np.ones(nbytes, np.uint8)

    def prepare():
        def timed():
            destination = np.empty_like(source)  # fresh pages, faulted in by the copy
            np.copyto(destination, source)
        return timed
    return prepare


ROWS = []


def row(measure: str, stock: float, neuron: float, unit: str, memcpy: float | None = None):
    ROWS.append((measure, stock, neuron, unit, memcpy))


def print_table(title: str, reference: str = "stock plugin via C API"):
    print(f"\n{title}")
    print(f"| measure | {reference} | pjrt-neuron | ratio | fresh memcpy | neuron / memcpy |")
    print("|---|---|---|---|---|---|")
    for measure, stock, neuron, unit, memcpy in ROWS:
        scale = 1e6 if unit == "us" else 1e3
        # JAX takes the stock plugin (platform name "cpu") for host memory and hands out a view of
        # its buffers instead of copying them to the host: no transfer to compare with.
        view = memcpy is not None and measure.startswith("device to host") and stock < memcpy / 10
        note = " (zero-copy view)" if view else ""
        ratio = "n/a" if view else f"{neuron / stock:.2f}"
        cells = f"| {measure} | {stock * scale:.1f} {unit}{note} | {neuron * scale:.1f} {unit} | {ratio} |"
        if memcpy is None:
            cells += " | |"
        else:
            cells += f" {memcpy * scale:.1f} {unit} | {memcpy / neuron:.2f}x memcpy speed |"
        print(cells, flush=True)
    ROWS.clear()


def bench_jax(quick: bool, sizes_mib: list[int]) -> None:
    os.environ.setdefault("JAX_PLATFORMS", f"neuron,{STOCK}")
    from jax._src import xla_bridge
    xla_bridge.register_plugin(STOCK, priority=0, library_path=stock_library(), options=None)
    import jax
    import jax.numpy as jnp
    import numpy as np

    devices = {STOCK: jax.devices(STOCK)[0], "neuron": jax.devices("neuron")[0]}
    repeats = 5 if quick else 11

    for count in (1, 16, 128):
        fns = {}
        for name, device in devices.items():
            placed = [jax.device_put(np.full((8,), i, np.float32), device) for i in range(count)]
            jitted = jax.jit(lambda *xs: tuple(x + 1 for x in xs))
            jax.block_until_ready(jitted(*placed))  # compile outside the timing
            fns[name] = (lambda j, p: lambda: jax.block_until_ready(j(*p)))(jitted, placed)
        number = max(20, 2000 // count) if not quick else max(10, 500 // count)
        t = alternate(fns, repeats, number)
        row(f"dispatch, {count} argument(s) and result(s)", t[STOCK], t["neuron"], "us")

    # A small MLP's SGD step: 784 -> 256 -> 10, batch 128.
    rng = np.random.default_rng(0)
    host_params = [rng.standard_normal(s, dtype=np.float32) * 0.05 for s in ((784, 256), (256,), (256, 10), (10,))]
    host_x = rng.standard_normal((128, 784), dtype=np.float32)
    host_y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]

    def loss(params, x, y):
        w1, b1, w2, b2 = params
        logits = jnp.tanh(x @ w1 + b1) @ w2 + b2
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))

    @jax.jit
    def step(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return [p - 0.1 * g for p, g in zip(params, grads)]

    fns = {}
    for name, device in devices.items():
        state = {"params": [jax.device_put(p, device) for p in host_params]}
        x, y = jax.device_put(host_x, device), jax.device_put(host_y, device)
        jax.block_until_ready(step(state["params"], x, y))

        def one_step(state=state, x=x, y=y):
            state["params"] = step(state["params"], x, y)
            jax.block_until_ready(state["params"])
        fns[name] = one_step
    t = alternate(fns, repeats, 20 if not quick else 5)
    row("training step, MLP 784-256-10, batch 128", t[STOCK], t["neuron"], "us")

    for mib in sizes_mib:
        host = np.ones(mib * MIB // 4, np.float32)

        def upload(device):
            def prepare():
                def timed():
                    jax.device_put(host, device).block_until_ready()
                return timed
            return prepare
        size_repeats = repeats if mib < 64 else max(3, repeats // 2)
        t = alternate_prepared({"memcpy": fresh_memcpy(mib * MIB),
                                **{name: upload(d) for name, d in devices.items()}}, size_repeats)
        row(f"host to device, {mib} MiB", t[STOCK], t["neuron"], "ms", t["memcpy"])

        def download(device):
            on_device = jax.device_put(host, device)

            def prepare():
                result = (on_device + 0).block_until_ready()  # a fresh array: np.asarray caches

                def timed():
                    np.asarray(result)
                return timed
            return prepare
        t = alternate_prepared({"memcpy": fresh_memcpy(mib * MIB),
                                **{name: download(d) for name, d in devices.items()}}, size_repeats)
        row(f"device to host, {mib} MiB", t[STOCK], t["neuron"], "ms", t["memcpy"])
    print_table(f"JAX {jax.__version__}, medians of {repeats} runs (ratio = pjrt-neuron / stock; "
                "memcpy speed = fresh memcpy time / pjrt-neuron time)")


# torch-xla: one device type per process, so each measures in a worker of its own.
def torch_worker(device_type: str, quick: bool, sizes_mib: list[int]) -> None:
    import torch
    if device_type == "STOCKCPU":
        from torch_xla.experimental import plugins

        class StockCpu(plugins.DevicePlugin):
            def library_path(self):
                return stock_library()
        plugins.register_plugin("STOCKCPU", StockCpu())
        plugins.use_dynamic_plugins()
    os.environ["PJRT_DEVICE"] = device_type
    import torch_xla
    import torch_xla.core.xla_model as xm

    device = torch_xla.device()
    repeats = 5 if quick else 9
    out = {}

    x = torch.ones(8, device=device)
    torch_xla.sync()

    def small_op():
        y = x + 1
        torch_xla.sync()
        xm.wait_device_ops()
        return y
    small_op()
    out["dispatch, 1 argument (x + 1, sync, wait)"] = statistics.median(
        [timed_loop(small_op, 50 if not quick else 10) for _ in range(repeats)])

    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.Tanh(), torch.nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    xs = torch.randn(128, 784, device=device)
    ys = torch.randint(0, 10, (128,), device=device)

    def train_step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(xs), ys).backward()
        optimizer.step()
        torch_xla.sync()
        xm.wait_device_ops()
    for _ in range(3):
        train_step()
    out["training step, MLP 784-256-10, batch 128"] = statistics.median(
        [timed_loop(train_step, 10 if not quick else 3) for _ in range(repeats)])

    for mib in sizes_mib:
        host = torch.ones(mib * MIB // 4)
        ups, downs = [], []
        for _ in range(repeats if mib < 64 else max(3, repeats // 2)):
            start = time.perf_counter()
            on_device = host.to(device)
            xm.wait_device_ops()
            ups.append(time.perf_counter() - start)
            result = on_device + 0
            torch_xla.sync()
            xm.wait_device_ops()
            start = time.perf_counter()
            result.cpu()
            downs.append(time.perf_counter() - start)
        out[f"host to device, {mib} MiB"] = statistics.median(ups)
        out[f"device to host, {mib} MiB"] = statistics.median(downs)
    print(json.dumps(out), flush=True)


def timed_loop(fn, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def torch_results(device_type: str, quick: bool, sizes_mib: list[int]) -> tuple[dict | None, str]:
    """A torch worker's figures, or None and why not."""
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_DEVICE", "JAX_PLATFORMS")}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    argv = [sys.executable, __file__, "--torch-worker", device_type, "--mib", ",".join(map(str, sizes_mib))]
    if quick:
        argv.append("--quick")
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1200)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode != 0 or not lines:
        last = [line for line in p.stderr.strip().splitlines() if line.strip()][-1:] or ["no output"]
        return None, f"exit {p.returncode}: {last[0]}"
    return json.loads(lines[-1]), ""


def bench_torch(quick: bool, sizes_mib: list[int]) -> None:
    results = {}
    reference, title = "STOCKCPU", "the stock plugin through the C API"
    results["STOCKCPU"], why = torch_results("STOCKCPU", quick, sizes_mib)
    if results["STOCKCPU"] is None:
        # torch-xla 2.9 sends a shorter PJRT_ExecuteOptions than the stock plugin accepts. Its
        # built-in CPU backend (no C API between) is the nearest reference left: a ratio there
        # mixes what any C API plugin costs with what this one adds.
        print(f"\ntorch-xla on the stock plugin (STOCKCPU) did not run ({why}); "
              "torch-xla's built-in CPU backend is the reference instead")
        reference, title = "CPU", "torch-xla's built-in CPU backend (not through the C API)"
        results["CPU"], why = torch_results("CPU", quick, sizes_mib)
    results["NEURON"], why_neuron = torch_results("NEURON", quick, sizes_mib)
    if results[reference] is None or results["NEURON"] is None:
        print(f"\ntorch-xla did not run ({why or why_neuron}); skipped")
        return
    memcpy = {}
    for mib in sizes_mib:
        prepare = fresh_memcpy(mib * MIB)
        memcpy[mib] = statistics.median([_time(prepare()) for _ in range(5)])
    for measure, stock in results[reference].items():
        mib = int(measure.split(", ")[1].split()[0]) if "MiB" in measure else None
        unit = "ms" if mib is not None or "training" in measure else "us"
        row(measure, stock, results["NEURON"][measure], unit, memcpy.get(mib))
    print_table("torch-xla, one process per device type, medians (each process measures its own); "
                f"reference: {title}", reference="stock plugin via C API" if reference == "STOCKCPU" else
                "torch-xla CPU backend")


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--no-torch", action="store_true", help="JAX only")
    parser.add_argument("--mib", default="1,16,256", help="transfer sizes in MiB")
    parser.add_argument("--torch-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(m) for m in args.mib.split(",") if m]
    if args.torch_worker:
        torch_worker(args.torch_worker, args.quick, sizes)
        return 0
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if not args.no_torch:
        bench_torch(args.quick, sizes)  # first: its workers must not share the CPUs with JAX's threads
    bench_jax(args.quick, sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
