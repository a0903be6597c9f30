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
import torch._decomp
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.shape_prop import _extract_tensor_metadata


class Unsupported(Exception):
    """The op cannot be lowered for the device; the message says why."""


@dataclass
class Lowered:
    text: str  # StableHLO
    outputs: list  # (shape, dtype) of each result, then of each written input
    result_slots: list  # flattened results of the op: index into outputs, None, or ("value", number)
    written_inputs: list  # input numbers the op writes, in output order after the results
    lifted: tuple  # per float argument: passed as a 0-d input (True) or compiled in (False)


@functools.lru_cache(maxsize=None)
def _decompositions(wide: bool):
    """torch-mlir's table; `wide` adds PyTorch's core ATen decompositions, for ops that torch-mlir
    lowers to other back ends but not to StableHLO (nll_loss_forward, for one)."""
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    table = dict(get_decomposition_table())
    if wide:
        table.update(torch._decomp.core_aten_decompositions())
    table[torch.ops.aten.var_mean.correction] = _var_mean
    table[torch.ops.aten.var.correction] = lambda *a, **k: _var_mean(*a, **k)[0]
    table.update(_foreach_decompositions())
    # torch-mlir computes batch norm's statistics in float64; PyTorch's decompositions compute them
    # in the input's computation type (through _var_mean below).
    aten = torch.ops.aten
    for op in (aten.native_batch_norm.default, aten._native_batch_norm_legit.default,
               aten._native_batch_norm_legit.no_stats, aten._native_batch_norm_legit_functional.default,
               aten._native_batch_norm_legit_no_training.default):
        if op in torch._decomp.decomposition_table:
            table[op] = torch._decomp.decomposition_table[op]
    table[torch.ops.aten.max_pool2d_with_indices_backward.default] = _max_pool2d_backward
    return table


def _max_pool2d_backward(grad_output, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Each window's gradient added at its maximum's place (`indices` count within a plane), as a
    scatter-add, which torch-mlir lowers and its own max_pool2d backward is not."""
    planes = tuple(x.shape[:-2])
    flat_grad = torch.ops.aten.reshape.default(grad_output, planes + (-1,))
    flat_indices = torch.ops.aten.reshape.default(indices, planes + (-1,))
    zeros = torch.ops.aten.zeros.default(planes + (x.shape[-2] * x.shape[-1],), dtype=grad_output.dtype,
                                         device=grad_output.device)
    summed = torch.ops.aten.scatter_add.default(zeros, -1, flat_indices, flat_grad)
    return torch.ops.aten.reshape.default(summed, tuple(x.shape))


def _foreach_decompositions() -> dict:
    """Optimizers' multi-tensor ops (`_foreach_add`, `_foreach_addcdiv`, ...) as one op per tensor:
    torch-mlir has no lowering for tensor lists, and in one program the two are the same."""
    table = {}
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, full = qualified.partition("::")
        name, _, overload = full.partition(".")
        if namespace != "aten" or not name.startswith("_foreach_") or name.endswith("_"):
            continue
        packet = getattr(torch.ops.aten, name, None)
        op = getattr(packet, overload or "default", None) if packet is not None else None
        if op is not None:
            table[op] = functools.partial(_foreach_each, name[len("_foreach_"):])
    return table


def _foreach_each(base_name: str, *args, **kwargs):
    lists = [a for a in args if isinstance(a, (list, tuple))]
    results = []
    for i in range(len(lists[0])):
        each = [a[i] if isinstance(a, (list, tuple)) else a for a in args]
        each_kwargs = {k: (v[i] if isinstance(v, (list, tuple)) else v) for k, v in kwargs.items()}
        results.append(_one_of_foreach(base_name, each, each_kwargs, i))
    return results


def _one_of_foreach(base_name: str, args: list, kwargs: dict, i: int):
    aten = torch.ops.aten
    if base_name == "norm":
        ord_ = args[1] if len(args) > 1 else kwargs.get("ord", 2)
        dtype = args[2] if len(args) > 2 else kwargs.get("dtype")
        return aten.linalg_vector_norm(args[0], ord_, dtype=dtype)
    if base_name == "copy":
        return aten.clone(args[1])
    if base_name in ("addcmul", "addcdiv") and len(args) == 4:
        value = args.pop()
        if isinstance(value, torch.Tensor):  # one scalar per tensor, in a tensor
            combine = aten.mul if base_name == "addcmul" else aten.div
            return aten.add(args[0], aten.mul(combine(args[1], args[2]), aten.select(value, 0, i)))
        kwargs["value"] = value
    return getattr(aten, base_name)(*args, **kwargs)


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    """var_mean in the tensor's own type: torch-mlir lowers it in float64, which NeuronCores lack."""
    dims = list(range(x.dim())) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    count = 1
    for d in dims:
        count *= x.shape[d]
    mean = torch.ops.aten.mean.dim(x, dims, True)
    centred = torch.ops.aten.sub.Tensor(x, mean)
    squares = torch.ops.aten.sum.dim_IntList(torch.ops.aten.mul.Tensor(centred, centred), dims, keepdim)
    divisor = max(count - (1 if correction is None else correction), 0)
    var = torch.ops.aten.div.Tensor(squares, divisor)
    return var, (mean if keepdim else torch.ops.aten.squeeze.dims(mean, dims))


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
                       decomposition_table=_decompositions(wide))(*metas)
    except Exception as e:  # tracing runs the op's meta kernel and decompositions
        text = str(e)
        if "data-independent" in text or "DynamicOutputShape" in type(e).__name__:
            raise Unsupported("its result's shape depends on the tensor's values (dynamic shapes), which the "
                              "Neuron compiler does not support") from None
        raise Unsupported(f"{type(e).__name__}: {text.splitlines()[0][:300] if text else ''}") from None


def _sentinels(floats: tuple) -> tuple:
    """Stand-ins for the floats, each of its own value and of the float's sign, so branches on a
    float's sign take the same side; a zero stands in for itself, and so is never lifted."""
    return tuple(v * (1 + (k + 1) / 256) for k, v in enumerate(floats))


def _literal_paths(node):
    for i, a in enumerate(node.args):
        yield ("args", i), a
    for name, a in node.kwargs.items():
        yield ("kwargs", name), a


def _is_tensor_argument(node, where) -> bool:
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return False
    kind, key = where
    for i, argument in enumerate(schema.arguments):
        if (kind == "args" and i == key) or (kind == "kwargs" and argument.name == key):
            return isinstance(argument.type, torch.TensorType)
    return False


def _float_positions(actual: torch.fx.GraphModule, stand_in: torch.fx.GraphModule, floats, sentinels):
    """Where each float reaches the traced program unchanged, as (node, where, float number), or None
    when the two traces differ in any other way (a float that was computed with, or branched on)."""
    nodes_a, nodes_b = list(actual.graph.nodes), list(stand_in.graph.nodes)
    if len(nodes_a) != len(nodes_b):
        return None
    index_a = {n: i for i, n in enumerate(nodes_a)}
    index_b = {n: i for i, n in enumerate(nodes_b)}
    positions = []

    def same(a, b):
        if isinstance(a, torch.fx.Node) or isinstance(b, torch.fx.Node):
            return isinstance(a, torch.fx.Node) and isinstance(b, torch.fx.Node) and index_a[a] == index_b[b]
        if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
            return (type(a) is type(b) and len(a) == len(b)) and all(same(x, y) for x, y in zip(a, b))
        return type(a) is type(b) and a == b

    for a, b in zip(nodes_a, nodes_b):
        if a.op != b.op or a.target != b.target or a.kwargs.keys() != b.kwargs.keys() or len(a.args) != len(b.args):
            return None
        for (where, value_a), (_, value_b) in zip(_literal_paths(a), _literal_paths(b)):
            if same(value_a, value_b):
                continue
            if not (isinstance(value_a, float) and isinstance(value_b, float) and value_b in sentinels):
                return None
            number = sentinels.index(value_b)
            if value_a != floats[number] or not _is_tensor_argument(a, where):
                return None
            positions.append((a, where, number))
    return positions


def _lift(graph: torch.fx.GraphModule, positions, may_lift, count: int) -> tuple:
    """Makes each lifted float a 0-d float32 input after the tensors; returns which floats were lifted."""
    lifted = sorted({number for _, _, number in positions if may_lift is None or may_lift[number]})
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    inputs = {}
    anchor = placeholders[-1] if placeholders else None
    for number in lifted:
        if anchor is None:
            with graph.graph.inserting_before(next(iter(graph.graph.nodes))):
                node = graph.graph.placeholder(f"scalar_{number}")
        else:
            with graph.graph.inserting_after(anchor):
                node = graph.graph.placeholder(f"scalar_{number}")
        node.meta["val"] = torch.empty((), dtype=torch.float32, device="meta")
        node.meta["tensor_meta"] = _extract_tensor_metadata(node.meta["val"])
        inputs[number] = anchor = node
    for node, (kind, key), number in positions:
        if number not in inputs:
            continue
        if kind == "args":
            args = list(node.args)
            args[key] = inputs[number]
            node.args = tuple(args)
        else:
            node.kwargs = {**node.kwargs, key: inputs[number]}
    return tuple(i in inputs for i in range(count))


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
        sentinels = _sentinels(floats)
        positions = _float_positions(graph, _trace(func, args_template, kwargs_template, inputs, sentinels, wide),
                                     floats, sentinels)
        if positions:
            lifted = _lift(graph, positions, may_lift, len(floats))

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
