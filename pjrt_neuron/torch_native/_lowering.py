"""One ATen op call (its shapes, dtypes and attributes) to one StableHLO program.

The call is traced on meta tensors into a functional FX graph (in-place and `out=` writes become
extra outputs) and lowered to StableHLO by torch-mlir, the lowering AWS's TorchNeuron uses too.
Tensors are always arguments, never constants, so no `dense_resource` weights reach the engine.
This runs in the lowering worker process (_lowering_worker), since torch-mlir can crash or hang on
an op it does not expect; the caller compiles the text through the plugin's compile pipeline.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from pjrt_neuron.torch_native._decompositions import decompositions
from pjrt_neuron.torch_native._float_lifting import float_positions, lift, sentinels_of


class Unsupported(Exception):
    """The op cannot be lowered for the device; the message says why."""


@dataclass
class Lowered:
    text: str  # StableHLO
    outputs: list  # (shape, dtype) of each result, then of each written input
    result_slots: list  # flattened results of the op: index into outputs, None, or ("value", number)
    written_inputs: list  # input numbers the op writes, in output order after the results
    lifted: tuple  # per float argument: passed as a 0-d input (True) or compiled in (False)


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


class FloatSlot(Slot):
    """Where a Python float sits in an op's arguments (a candidate for a runtime input)."""


class NodeRef(tuple):
    """A node's name, where an encoded node refers to another."""


class OpRef(tuple):
    """An ATen op by (namespace, name, overload)."""


def decode_graph(nodes: list) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    made: dict = {}

    def decode(value):
        if isinstance(value, NodeRef):
            return made[value[0]]
        if isinstance(value, OpRef):
            namespace, name, overload = value
            return getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")
        if isinstance(value, list):
            return [decode(v) for v in value]
        if isinstance(value, tuple):
            return tuple(decode(v) for v in value)
        if isinstance(value, dict):
            return {k: decode(v) for k, v in value.items()}
        return value

    for op, name, target, args, kwargs, stack_trace in nodes:
        made[name] = graph.create_node(op, decode(target), decode(args), decode(kwargs), name)
        if stack_trace:
            made[name].meta["stack_trace"] = stack_trace
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def fill(template, tensors, floats=()):
    if isinstance(template, FloatSlot):
        return floats[template.number]
    if isinstance(template, Slot):
        return tensors[template.number]
    if isinstance(template, (list, tuple)):
        return type(template)(fill(v, tensors, floats) for v in template)
    if isinstance(template, dict):
        return {k: fill(v, tensors, floats) for k, v in template.items()}
    return template


# (op, position of `dim`, of `end`, of the tensor whose size bounds `end` or of its sizes)
_SLICE_BOUNDS = {"aten::slice_backward": (2, 4, 1), "aten::slice_scatter": (2, 4, 0), "aten::slice": (1, 3, 0)}


def _bounded_slice(func, args_template, inputs):
    """`end` past the dimension (x[1:] passes 2**63 - 1) clamped to it: torch-mlir would try to
    materialise the unclamped range."""
    schema = getattr(func, "_schema", None)
    where = _SLICE_BOUNDS.get(schema.name) if schema is not None else None
    if where is None:
        return args_template
    dim_at, end_at, size_at = where
    args = list(args_template)
    if len(args) <= end_at or not isinstance(args[end_at], int):
        return args_template
    bound = args[size_at]
    sizes = inputs[bound.number][0] if isinstance(bound, Slot) else bound
    dim = args[dim_at] if len(args) > dim_at else 0
    if isinstance(dim, int) and isinstance(sizes, (list, tuple)) and -len(sizes) <= dim < len(sizes):
        args[end_at] = min(args[end_at], sizes[dim])
    return tuple(args)


def lower(func, args_template, kwargs_template, inputs: tuple, aliased_results: frozenset,
          floats: tuple = (), may_lift: tuple | None = None) -> Lowered:
    args_template = _bounded_slice(func, args_template, inputs)
    request = (func, args_template, kwargs_template, inputs, aliased_results, floats, may_lift)
    try:
        lowered = _lower_with(*request, wide=False)
    except Unsupported:
        return _lower_with(*request, wide=True)
    if "f64" in lowered.text:
        # torch-mlir computes some ops (var_mean in layer norm) in float64, which NeuronCores lack;
        # PyTorch's own decompositions keep them in the tensors' type.
        try:
            narrow = _lower_with(*request, wide=True)
        except Unsupported:
            return lowered
        if "f64" not in narrow.text:
            return narrow
    return lowered


def _trace(func, args_template, kwargs_template, inputs, floats, wide: bool) -> torch.fx.GraphModule:
    from torch.func import functionalize

    def call(*tensors):
        if isinstance(func, torch.fx.GraphModule):
            # Node by node, so each traced op keeps the user's line its graph node came from.
            from torch.fx import traceback as fx_traceback

            with fx_traceback.preserve_node_meta():
                return torch.fx.Interpreter(func).run(*fill(args_template, tensors, floats))
        return func(*fill(args_template, tensors, floats), **fill(kwargs_template, tensors, floats))

    metas = [torch.empty(shape, dtype=dtype, device="meta") for shape, dtype in inputs]
    try:
        return make_fx(functionalize(call, remove="mutations_and_views"),
                       decomposition_table=decompositions(wide))(*metas)
    except Exception as e:  # tracing runs the op's meta kernel and decompositions
        text = str(e)
        if "data-independent" in text or "DynamicOutputShape" in type(e).__name__:
            raise Unsupported("its result's shape depends on the tensor's values (dynamic shapes), which the "
                              "Neuron compiler does not support") from None
        raise Unsupported(f"{type(e).__name__}: {text.splitlines()[0][:300] if text else ''}") from None


def _lower_with(func, args_template, kwargs_template, inputs: tuple, aliased_results: frozenset,
                floats: tuple, may_lift, wide: bool) -> Lowered:
    """`inputs`: (shape, dtype) per Slot; `floats`: the value per FloatSlot. `aliased_results`: result
    positions that are an input the op wrote (in-place ops' `self`, `out=`), returned by the caller as
    that input. Floats that pass unchanged into tensor arguments become 0-d inputs (`lifted`), so a
    learning rate that changes every step does not compile a program every step."""
    args_template, kwargs_template = _meta_device(args_template), _meta_device(kwargs_template)
    graph = _trace(func, args_template, kwargs_template, inputs, floats, wide)
    lifted = (False,) * len(floats)
    if floats:
        sentinels = sentinels_of(floats)
        positions = float_positions(graph, _trace(func, args_template, kwargs_template, inputs, sentinels, wide),
                                    floats, sentinels)
        if positions:
            lifted = lift(graph, positions, may_lift, len(floats))

    written: dict[int, object] = {}
    for node in graph.graph.nodes:
        # Traced on meta tensors; torch-mlir lowers factory ops only for a host device.
        if node.op == "call_function" and isinstance(node.kwargs.get("device"), torch.device):
            node.kwargs = {**node.kwargs, "device": torch.device("cpu")}
        if node.op == "call_function":
            node.target = _view_of_copy(node.target)
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
        if node is None or position in aliased_results:
            result_slots.append(None)
            continue
        if not isinstance(node, torch.fx.Node):
            # A number the program computes from shapes alone (a size a compiled graph returns
            # under dynamic shapes): known now, returned as it is.
            result_slots.append(("value", node))
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
    return Lowered(_to_stablehlo(graph), specs, result_slots, written_inputs, lifted)


@functools.lru_cache(maxsize=None)
def _view_of_copy(target):
    """Functionalization writes views as their *_copy ops (view_copy, slice_copy, ...), which
    torch-mlir lowers only as the views themselves; in a value graph the two are the same."""
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return target
    name = target._schema.name.split("::")[1]
    if not name.endswith("_copy") or name in ("_copy", "_to_copy", "lift_fresh_copy"):
        return target
    view = getattr(getattr(torch.ops.aten, name[: -len("_copy")], None), target._overloadname, None)
    return view if view is not None and view.is_view else target


def _to_stablehlo(graph: torch.fx.GraphModule) -> str:
    from torch_mlir import fx as torch_mlir_fx
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_dialect
    from torch_mlir.extras.fx_importer import FxImporter

    context = ir.Context()
    # One thread: diagnostics call back into Python, and ops are small.
    context.enable_multithreading(False)
    torch_dialect.register_dialect(context)
    diagnostics: list[str] = []

    def collect(diagnostic):  # kept for the error message instead of printed to stderr
        diagnostics.append(str(diagnostic.message))
        return True

    context.attach_diagnostic_handler(collect)
    try:
        module = torch_mlir_fx.stateless_fx_import(graph, output_type="stablehlo",
                                                   fx_importer=FxImporter(context=context))
    except Exception as e:
        detail = diagnostics[0] if diagnostics else (str(e).splitlines() or [""])[0]
        raise Unsupported(f"torch-mlir has no StableHLO lowering for it ({detail[:300]})") from None
    located = any(n.meta.get("stack_trace") for n in graph.graph.nodes)
    # Source locations become the program's metadata, which Trainium diagnostics name.
    return _float32_scalar_constants(module.operation.get_asm(enable_debug_info=located))


_F64_CONSTANT = re.compile(r"^(\s*)(%[\w.]+) = arith\.constant dense<([^>]+)> : tensor<(\d*x?)f64>", re.M)


def _float32_scalar_constants(text: str) -> str:
    """torch-mlir writes each Python float of an op as a float64 constant converted to float32 where
    it is used; NeuronCores have no float64, so the constant is written as float32 when converting
    is all that is done with it (the decimal rounds to the same float32)."""
    for match in list(_F64_CONSTANT.finditer(text)):
        name, shape = match.group(2), match.group(4)
        uses = re.findall(rf"{re.escape(name)}\b[^\n]*", text[match.end():])
        converts = rf"^{re.escape(name)} : \(tensor<{shape}f64>\) -> tensor<{shape}f32>"
        converted = [u for u in re.findall(rf"stablehlo\.convert {re.escape(name)}\b[^\n]*", text)]
        if not uses or len(converted) != len(uses) or not all(
                re.match(converts, u[len("stablehlo.convert "):]) for u in converted):
            continue
        text = text.replace(match.group(0), f"{match.group(1)}{name} = arith.constant dense<{match.group(3)}> : "
                                             f"tensor<{shape}f32>", 1)
        text = text.replace(f"stablehlo.convert {name} : (tensor<{shape}f64>)",
                            f"stablehlo.convert {name} : (tensor<{shape}f32>)")
    return text
