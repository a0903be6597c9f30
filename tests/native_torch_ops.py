"""PyTorch's own op database (op_db, shipped in the torch wheel) on the native `neuron` device.

Each op's sample inputs run on the CPU and on neuron, forward and (where the op supports autograd)
backward, and are compared. An op is *passed* when every sample it ran matches, *refused* when the
device said it cannot run it (NotImplementedError, or TypeError for an element type NeuronCores
lack) and *failed* otherwise (a different number, shape or dtype, or any other error).

    python tests/native_torch_ops.py                 # the census: counts, and each failure
    python tests/native_torch_ops.py --write         # also rewrite native_torch_ops_passing.txt
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import torch

PASSING_LIST = Path(__file__).with_name("native_torch_ops_passing.txt")
SAMPLES_PER_OP = 1
DTYPES = {"float32": torch.float32, "int64": torch.int64, "bool": torch.bool, "bfloat16": torch.bfloat16}


def op_name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


@functools.lru_cache(maxsize=None)
def operators():
    from torch.testing._internal.common_methods_invocations import op_db

    return {op_name(op): op for op in op_db}


def _tree(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_tree(v, fn) for v in obj)
    if isinstance(obj, dict):
        return {k: _tree(v, fn) for k, v in obj.items()}
    return obj


def _to_neuron(t: torch.Tensor) -> torch.Tensor:
    moved = t.detach().to("neuron")
    return moved.requires_grad_(t.requires_grad) if t.requires_grad else moved


def _tensors(obj) -> list:
    found = []
    _tree(obj, lambda t: found.append(t) or t)
    return found


# Ops whose results' values are undefined (uninitialised memory): only sizes and dtype count.
UNDEFINED_VALUES = {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"}


def _compare(cpu, neuron, dtype, values: bool = True) -> None:
    cpu_tensors, neuron_tensors = _tensors(cpu), _tensors(neuron)
    if len(cpu_tensors) != len(neuron_tensors):
        raise AssertionError(f"{len(neuron_tensors)} tensors on neuron, {len(cpu_tensors)} on the CPU")
    if not cpu_tensors and cpu != neuron:
        raise AssertionError(f"{neuron!r} on neuron, {cpu!r} on the CPU")
    loose = dtype in (torch.bfloat16,)
    for c, n in zip(cpu_tensors, neuron_tensors):
        if n.device.type != "neuron" and c.device.type != "cpu":
            raise AssertionError(f"a result on {n.device}")
        if not values:
            if (n.shape, n.dtype) != (c.shape, c.dtype):
                raise AssertionError(f"{n.shape} {n.dtype} on neuron, {c.shape} {c.dtype} on the CPU")
            continue
        torch.testing.assert_close(n.detach().cpu(), c.detach(), equal_nan=True, check_device=False,
                                   atol=1e-2 if loose else 1e-4, rtol=1e-2 if loose else 1e-4)


def _run(op, sample, device_inputs):
    inputs, args, kwargs = device_inputs
    return op(inputs, *args, **kwargs)


def check(op, dtype: torch.dtype, samples: int = SAMPLES_PER_OP) -> tuple[str, str]:
    """('passed' | 'refused' | 'failed', detail)."""
    try:
        cases = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:samples]
    except Exception as e:
        return "refused", f"no samples: {e}"
    if not cases:
        return "refused", "no samples"
    try:
        for sample in cases:
            torch.manual_seed(0)
            cpu = op(sample.input, *sample.args, **sample.kwargs)
            neuron_inputs = _tree((sample.input, sample.args, sample.kwargs), _to_neuron)
            torch.manual_seed(0)
            neuron = _run(op, sample, neuron_inputs)
            _compare(cpu, neuron, dtype, values=op.name not in UNDEFINED_VALUES)
        if op.supports_autograd and dtype.is_floating_point:
            _check_backward(op, dtype)
    except (NotImplementedError, TypeError) as e:
        return "refused", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    except Exception as e:
        return "failed", f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
    return "passed", ""


def _check_backward(op, dtype) -> None:
    sample = next(iter(op.sample_inputs("cpu", dtype, requires_grad=True)), None)
    if sample is None:
        return
    grads = []
    for device in ("cpu", "neuron"):
        inputs = _tree((sample.input, sample.args, sample.kwargs),
                       (lambda t: t.detach().requires_grad_(t.requires_grad)) if device == "cpu" else _to_neuron)
        leaves = [t for t in _tensors(inputs) if t.requires_grad]
        torch.manual_seed(0)
        out = op(inputs[0], *inputs[1], **inputs[2])
        outs = [o for o in _tensors(out) if o.requires_grad and o.dtype.is_floating_point]
        if not outs or not leaves:
            return
        total = sum(o.sum() for o in outs)
        grads.append(torch.autograd.grad(total, leaves, allow_unused=True))
    for c, n in zip(*grads):
        if (c is None) != (n is None):
            raise AssertionError("a gradient is missing on one device")
        if c is not None:
            torch.testing.assert_close(n.cpu(), c, equal_nan=True, atol=1e-3, rtol=1e-3)


def census(names=None, dtypes=("float32",), samples: int = SAMPLES_PER_OP, out=sys.stdout, start: str = "",
           verbose: bool = False, on_result=None) -> dict:
    """{(op, dtype): (outcome, detail)} over op_db, or the ops named."""
    ops = operators()
    results = {}
    for name in names or sorted(ops):
        if start and name < start:
            continue
        if verbose:
            print(f"... {name}", file=sys.stderr, flush=True)
        op = ops[name]
        for dtype_name in dtypes:
            dtype = DTYPES[dtype_name]
            if dtype not in op.supported_dtypes("cpu"):
                continue
            results[(name, dtype_name)] = outcome = check(op, dtype, samples)
            if out is not None and (outcome[0] == "failed" or verbose):
                print(f"{outcome[0]:8}{name} {dtype_name}: {outcome[1]}", file=out, flush=True)
            if on_result is not None:
                on_result(results)
    return results


def counts(results: dict) -> dict:
    tally = {"passed": 0, "failed": 0, "refused": 0}
    for outcome, _ in results.values():
        tally[outcome] += 1
    return tally


def _list_writer():
    """Rewrites the expected list after every op (a run cut short keeps what it found): ops this
    run did not visit keep their line, the ones it visited are decided by it."""
    kept = set()
    if PASSING_LIST.exists():
        kept = {line.strip() for line in PASSING_LIST.read_text().splitlines()
                if line.strip() and not line.startswith("#")}

    def write(results):
        visited = {f"{name} {dtype}" for name, dtype in results}
        passing = {f"{name} {dtype}" for (name, dtype), (outcome, _) in results.items() if outcome == "passed"}
        PASSING_LIST.write_text("# op_db ops (and element types) that match the CPU on neuron; "
                                "tests/native_torch_ops.py --write rewrites it\n"
                                + "\n".join(sorted((kept - visited) | passing)) + "\n")
    return write


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the list of ops expected to pass")
    parser.add_argument("--dtype", action="append", choices=sorted(DTYPES), help="default: float32")
    parser.add_argument("--samples", type=int, default=SAMPLES_PER_OP)
    parser.add_argument("--start", default="", help="skip ops whose names sort before this one")
    parser.add_argument("--verbose", action="store_true", help="name each op on stderr as it starts")
    parser.add_argument("ops", nargs="*")
    args = parser.parse_args(argv)
    dtypes = args.dtype or ["float32"]
    write = _list_writer() if args.write else None
    results = census(args.ops or None, dtypes, args.samples, start=args.start, verbose=args.verbose,
                     on_result=write)
    for dtype_name in dtypes:
        tally = counts({k: v for k, v in results.items() if k[1] == dtype_name})
        print(f"op_db on neuron, {dtype_name}: {tally['passed']} passed, {tally['failed']} failed, "
              f"{tally['refused']} refused (ops x dtypes, {args.samples} sample each, forward and backward)")
    return 0


if __name__ == "__main__":
    import pjrt_neuron  # noqa: F401  (the device registers at `import torch`; this checks the install)

    sys.exit(main())
