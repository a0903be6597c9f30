"""One ATen op call (its shapes, dtypes and attributes) to one compiled program.

The call is traced on meta tensors into a functional FX graph (in-place and `out=` writes become
extra outputs), lowered to StableHLO by torch-mlir, and compiled by the plugin's compile pipeline,
so the compile cache, the compatibility diagnostics and the estimate see it as any program.
torch-mlir is the lowering AWS's TorchNeuron uses too; tensors are always arguments, never
constants, so no `dense_resource` weights reach the engine.
"""

from __future__ import annotations

import concurrent.futures
import functools
from dataclasses import dataclass

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pjrt_neuron.torch_native._runtime import runtime


class Unsupported(Exception):
    """The op cannot be lowered for the device; the message says why."""


@dataclass
class Program:
    executable: object
    outputs: list  # (shape, dtype) of each result, then of each written input
    result_slots: list  # flattened results of the op: index into outputs, or None
    written_inputs: list  # input numbers the op writes, in output order after the results


@functools.lru_cache(maxsize=None)
def _decompositions():
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    return get_decomposition_table()


def _meta_device(value):
    if isinstance(value, torch.device) and value.type == "neuron":
        return torch.device("meta")
    if isinstance(value, (list, tuple)):
        return type(value)(_meta_device(v) for v in value)
    return value


class Slot:
    """Where a tensor input sits in an op's arguments."""

    __slots__ = ("number",)

    def __init__(self, number: int):
        self.number = number

    def __repr__(self):
        return f"Slot({self.number})"


def fill(template, tensors):
    if isinstance(template, Slot):
        return tensors[template.number]
    if isinstance(template, (list, tuple)):
        return type(template)(fill(v, tensors) for v in template)
    if isinstance(template, dict):
        return {k: fill(v, tensors) for k, v in template.items()}
    return template


_tracer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="neuron-lowering")


def lower(func, args_template, kwargs_template, inputs: tuple, aliased_results: frozenset) -> Program:
    """Lowers on a thread of its own: inside __torch_dispatch__ the dispatcher excludes the keys that
    tracing needs (functionalization, autograd) for this thread."""
    return _tracer.submit(_lower, func, args_template, kwargs_template, inputs, aliased_results).result()


def _lower(func, args_template, kwargs_template, inputs: tuple, aliased_results: frozenset) -> Program:
    """`inputs`: (shape, dtype) per Slot. `aliased_results`: result positions that are an input the
    op wrote (in-place ops' `self`, `out=`), returned by the caller as that input."""
    from torch.func import functionalize

    args_template, kwargs_template = _meta_device(args_template), _meta_device(kwargs_template)
    written: dict[int, object] = {}

    def call(*tensors):
        return func(*fill(args_template, tensors), **fill(kwargs_template, tensors))

    metas = [torch.empty(shape, dtype=dtype, device="meta") for shape, dtype in inputs]
    try:
        graph = make_fx(functionalize(call, remove="mutations_and_views"),
                        decomposition_table=_decompositions())(*metas)
    except Exception as e:  # tracing runs the op's meta kernel and decompositions
        raise Unsupported(f"{type(e).__name__}: {e}") from None

    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    output_node = next(n for n in graph.graph.nodes if n.op == "output")
    for node in list(graph.graph.nodes):
        if node.op == "call_function" and node.target is torch.ops.aten.copy_.default \
                and node.args[0] in placeholders:
            written[placeholders.index(node.args[0])] = node.args[1]
            node.replace_all_uses_with(node.args[1])
            graph.graph.erase_node(node)

    results = output_node.args[0]
    flat_results = list(results) if isinstance(results, (list, tuple)) else [results]
    outputs, result_slots = [], []
    for position, node in enumerate(flat_results):
        if node is None or position in aliased_results or not isinstance(node, torch.fx.Node):
            result_slots.append(None)
            continue
        result_slots.append(len(outputs))
        outputs.append(node)
    written_inputs = sorted(written)
    outputs += [written[i] for i in written_inputs]
    if not outputs:
        raise Unsupported("the op has no tensor result")
    output_node.args = (tuple(outputs),)
    graph.graph.lint()
    graph.recompile()

    specs = []
    for node in outputs:
        meta = node.meta.get("val")
        if not isinstance(meta, torch.Tensor):
            raise Unsupported("a result is not a tensor")
        specs.append((tuple(meta.shape), meta.dtype))
    text = _to_stablehlo(graph)
    try:
        executable = runtime().compile(text)
    except Exception as e:
        raise Unsupported(f"the plugin could not compile the lowered program: {e}") from None
    return Program(executable, specs, result_slots, written_inputs)


def _to_stablehlo(graph: torch.fx.GraphModule) -> str:
    from torch_mlir import fx as torch_mlir_fx

    try:
        module = torch_mlir_fx.stateless_fx_import(graph, output_type="stablehlo")
    except Exception as e:
        raise Unsupported(f"torch-mlir has no StableHLO lowering for it ({str(e).splitlines()[0][:300]})") from None
    return str(module)
