"""Which Python floats of an op call become 0-d inputs of its program, so a value that changes
every call (a learning rate) does not compile a program every call: the op is traced again with
stand-ins, and a float that reaches a tensor argument unchanged in both traces is lifted."""

from __future__ import annotations

import torch
from torch.fx.passes.shape_prop import _extract_tensor_metadata


def sentinels_of(floats: tuple) -> tuple:
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


def float_positions(actual: torch.fx.GraphModule, stand_in: torch.fx.GraphModule, floats, sentinels):
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


def lift(graph: torch.fx.GraphModule, positions, may_lift, count: int) -> tuple:
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
