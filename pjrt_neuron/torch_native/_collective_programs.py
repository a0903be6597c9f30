"""The neuron backend's collectives as programs: small replicated StableHLO modules (all_reduce,
all_gather, reduce_scatter, and what is built from them), one compiled per shape, dtype, reduce
op and world size, which every rank compiles alike."""

from __future__ import annotations

import functools

import torch
from torch.distributed import ReduceOp

from pjrt_neuron.torch_native._programs import tensor_type
from pjrt_neuron.torch_native._runtime import runtime


_REGION_OPS = {"sum": "add", "product": "multiply", "max": "maximum", "min": "minimum",
               "band": "and", "bor": "or", "bxor": "xor"}
_BOOL_OPS = {"sum": "or", "max": "or", "bor": "or", "product": "and", "min": "and", "band": "and", "bxor": "xor"}
_REDUCE_OPS = {ReduceOp.SUM: "sum", ReduceOp.AVG: "avg", ReduceOp.PRODUCT: "product", ReduceOp.MAX: "max",
               ReduceOp.MIN: "min", ReduceOp.BAND: "band", ReduceOp.BOR: "bor", ReduceOp.BXOR: "bxor"}


def reduce_name(op) -> str:
    for known, name in _REDUCE_OPS.items():
        if op == known:
            return name
    raise NotImplementedError(f"the neuron backend does not support the reduce op {op} "
                              "(supported: SUM, AVG, PRODUCT, MAX, MIN, BAND, BOR, BXOR)")


def _region(reduce: str, dtype: torch.dtype) -> str:
    """The reduction's body, as an all_reduce or reduce_scatter takes it."""
    if dtype == torch.bool:
        op = _BOOL_OPS[reduce]
    else:
        if reduce in ("band", "bor", "bxor") and (dtype.is_floating_point or dtype == torch.bool):
            raise TypeError(f"the neuron backend: {reduce.upper()} needs an integer tensor, not {dtype}")
        op = _REGION_OPS["sum" if reduce == "avg" else reduce]
    scalar = tensor_type((), dtype)
    return (f"({{\n      ^bb0(%x: {scalar}, %y: {scalar}):\n        %r = stablehlo.{op} %x, %y : {scalar}\n"
            f"        stablehlo.return %r : {scalar}\n    }})")


def _groups(world: int) -> str:
    ranks = ", ".join(str(r) for r in range(world))
    return f"replica_groups = dense<[[{ranks}]]> : tensor<1x{world}xi64>"


def _module(inputs: list[str], outputs: list[str], body: list[str]) -> str:
    params = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(inputs))
    results = outputs[0] if len(outputs) == 1 else "(" + ", ".join(outputs) + ")"
    lines = "\n    ".join(body)
    return f"module {{\n  func.func @main({params}) -> {results} {{\n    {lines}\n  }}\n}}\n"


def _average(body: list[str], value_name: str, shape, dtype, world: int) -> str:
    t = tensor_type(shape, dtype)
    count = f"{float(world)}" if dtype.is_floating_point else str(world)
    body += [f"%world = stablehlo.constant dense<{count}> : {t}",
             f"%avg = stablehlo.divide {value_name}, %world : {t}"]
    return "%avg"


@functools.lru_cache(maxsize=None)
def all_reduce_program(shape, dtype, reduce: str, world: int):
    if reduce in ("band", "bor", "bxor") and dtype != torch.bool:
        return _gathered_reduce_program(shape, dtype, reduce, world)
    t = tensor_type(shape, dtype)
    body = [f'%sum = "stablehlo.all_reduce"(%arg0) {_region(reduce, dtype)} {{{_groups(world)}}} : ({t}) -> {t}']
    result = _average(body, "%sum", shape, dtype, world) if reduce == "avg" else "%sum"
    body.append(f"return {result} : {t}")
    return runtime().compile(_module([t], [t], body), num_replicas=world)


def _gathered_reduce_program(shape, dtype, reduce: str, world: int):
    """A bitwise all_reduce of integers, which XLA's CPU collectives do not reduce: every rank's
    elements gathered into rows, then reduced on each rank alike."""
    _region(reduce, dtype)  # refuses floats
    numel = _numel(shape)
    t, row, rows = tensor_type(shape, dtype), tensor_type((1, numel), dtype), tensor_type((world, numel), dtype)
    flat, scalar = tensor_type((numel,), dtype), tensor_type((), dtype)
    body = [f"%row = stablehlo.reshape %arg0 : ({t}) -> {row}",
            f'%rows = "stablehlo.all_gather"(%row) {{all_gather_dim = 0 : i64, {_groups(world)}}} : ({row}) -> {rows}',
            f"%init = stablehlo.constant dense<{-1 if reduce == 'band' else 0}> : {scalar}",
            f'%flat = "stablehlo.reduce"(%rows, %init) ({{\n      ^bb0(%x: {scalar}, %y: {scalar}):\n'
            f"        %r = stablehlo.{_REGION_OPS[reduce]} %x, %y : {scalar}\n        stablehlo.return %r : {scalar}\n"
            f"    }}) {{dimensions = array<i64: 0>}} : ({rows}, {scalar}) -> {flat}",
            f"%out = stablehlo.reshape %flat : ({flat}) -> {t}", f"return %out : {t}"]
    return runtime().compile(_module([t], [t], body), num_replicas=world)


_INTS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@functools.lru_cache(maxsize=None)
def broadcast_program(shape, dtype, src: int, world: int):
    t = tensor_type(shape, dtype)
    body, result = _broadcast_body(shape, dtype, src, world)
    body.append(f"return {result} : {t}")
    return runtime().compile(_module([t], [t], body), num_replicas=world)


@functools.lru_cache(maxsize=None)
def scatter_program(row_shape, dtype, src: int, world: int):
    """`src`'s rows (world, *row_shape) broadcast as in _broadcast_body; each rank keeps its row."""
    rows_shape = (world, *row_shape)
    rows, row = tensor_type(rows_shape, dtype), tensor_type((1, *row_shape), dtype)
    out = tensor_type(row_shape, dtype)
    body, result = _broadcast_body(rows_shape, dtype, src, world)
    zeros = ", ".join(["%zero_index"] * len(row_shape))
    body += ["%my_id = stablehlo.replica_id : tensor<ui32>",
             "%my_row = stablehlo.convert %my_id : (tensor<ui32>) -> tensor<i64>",
             "%zero_index = stablehlo.constant dense<0> : tensor<i64>",
             f"%my_block = stablehlo.dynamic_slice {result}, %my_row{', ' + zeros if zeros else ''}, "
             f"sizes = [1{''.join(', ' + str(d) for d in row_shape)}] : ({rows}, tensor<i64>"
             f"{''.join(', tensor<i64>' for _ in row_shape)}) -> {row}",
             f"%out = stablehlo.reshape %my_block : ({row}) -> {out}", f"return %out : {out}"]
    return runtime().compile(_module([rows], [out], body), num_replicas=world)


@functools.lru_cache(maxsize=None)
def all_to_all_program(shape, dtype, world: int, blocks_apart: bool = False):
    """Rank r's block j (of `world` equal blocks along dim 0) becomes rank j's block r; with
    `blocks_apart`, the received blocks are separate outputs (all_to_all into a list)."""
    t = tensor_type(shape, dtype)
    body = [f'%out = "stablehlo.all_to_all"(%arg0) {{split_dimension = 0 : i64, concat_dimension = 0 : i64, '
            f"split_count = {world} : i64, {_groups(world)}}} : ({t}) -> {t}"]
    if not blocks_apart:
        body.append(f"return %out : {t}")
        return runtime().compile(_module([t], [t], body), num_replicas=world)
    block_shape = (shape[0] // world, *shape[1:])
    block, one = tensor_type(block_shape, dtype), tensor_type(shape[1:], dtype)
    rest = "".join(f", 0:{d}" for d in shape[1:])
    for r in range(world):
        body += [f"%block{r} = stablehlo.slice %out [{r}:{r + 1}{rest}] : ({t}) -> {block}",
                 f"%out{r} = stablehlo.reshape %block{r} : ({block}) -> {one}"]
    body.append("return " + ", ".join(f"%out{r}" for r in range(world)) + " : " + ", ".join([one] * world))
    return runtime().compile(_module([t], [one] * world, body), num_replicas=world)


def _broadcast_body(shape, dtype, src: int, world: int) -> tuple[list, str]:
    """Every rank's elements but `src`'s become zero bits, then a sum over the ranks: the source's
    bits arrive exactly (floats are summed as integers of their width, so -0.0 and NaNs survive)."""
    t = tensor_type(shape, dtype)
    body = []
    if dtype == torch.bool:
        bits_dtype, source, zero = dtype, "%arg0", "false"
    elif dtype.is_floating_point:
        bits_dtype, source, zero = _INTS[dtype.itemsize], "%bits", "0"
        body.append(f"%bits = stablehlo.bitcast_convert %arg0 : ({t}) -> {tensor_type(shape, bits_dtype)}")
    else:
        bits_dtype, source, zero = dtype, "%arg0", "0"
    bits, pred = tensor_type(shape, bits_dtype), tensor_type(shape, torch.bool)
    body += ["%id = stablehlo.replica_id : tensor<ui32>",
             f"%src = stablehlo.constant dense<{src}> : tensor<ui32>",
             "%is_src = stablehlo.compare EQ, %id, %src : (tensor<ui32>, tensor<ui32>) -> tensor<i1>",
             f"%mask = stablehlo.broadcast_in_dim %is_src, dims = [] : (tensor<i1>) -> {pred}",
             f"%zero = stablehlo.constant dense<{zero}> : {bits}",
             f"%mine = stablehlo.select %mask, {source}, %zero : {pred}, {bits}",
             f'%sum = "stablehlo.all_reduce"(%mine) {_region("sum", bits_dtype)} {{{_groups(world)}}} : ({bits}) -> {bits}']
    if bits_dtype is dtype:
        return body, "%sum"
    body.append(f"%sent = stablehlo.bitcast_convert %sum : ({bits}) -> {t}")
    return body, "%sent"


@functools.lru_cache(maxsize=None)
def all_gather_program(in_shape, out_shapes: tuple, dtype, world: int):
    """Gathers each rank's elements into rows (world, numel), then gives each output: one output
    of all rows (all_gather_into_tensor), or one output per row (all_gather into a list)."""
    numel = _numel(in_shape)
    t_in, row, rows = tensor_type(in_shape, dtype), tensor_type((1, numel), dtype), tensor_type((world, numel), dtype)
    body = [f"%row = stablehlo.reshape %arg0 : ({t_in}) -> {row}",
            f'%rows = "stablehlo.all_gather"(%row) {{all_gather_dim = 0 : i64, {_groups(world)}}} : ({row}) -> {rows}']
    results = []
    if len(out_shapes) == 1:
        out = tensor_type(out_shapes[0], dtype)
        body.append(f"%out0 = stablehlo.reshape %rows : ({rows}) -> {out}")
        results.append(("%out0", out))
    else:
        for r, shape in enumerate(out_shapes):
            out = tensor_type(shape, dtype)
            body += [f"%slice{r} = stablehlo.slice %rows [{r}:{r + 1}, 0:{numel}] : ({rows}) -> {row}",
                     f"%out{r} = stablehlo.reshape %slice{r} : ({row}) -> {out}"]
            results.append((f"%out{r}", out))
    body.append("return " + ", ".join(n for n, _ in results) + " : " + ", ".join(t for _, t in results))
    return runtime().compile(_module([t_in], [t for _, t in results], body), num_replicas=world)


@functools.lru_cache(maxsize=None)
def reduce_scatter_program(in_shapes: tuple, out_shape, dtype, reduce: str, world: int):
    """The inputs' elements as one row per destination rank (one input of world * n elements, or
    one input per rank), reduced over the ranks; rank r keeps row r."""
    numel = _numel(out_shape)
    rows, row = tensor_type((world, numel), dtype), tensor_type((1, numel), dtype)
    inputs = [tensor_type(s, dtype) for s in in_shapes]
    body = []
    if len(in_shapes) == 1:
        body.append(f"%rows = stablehlo.reshape %arg0 : ({inputs[0]}) -> {rows}")
    else:
        for r, t in enumerate(inputs):
            body.append(f"%row{r} = stablehlo.reshape %arg{r} : ({t}) -> {row}")
        names = ", ".join(f"%row{r}" for r in range(len(inputs)))
        body.append(f"%rows = stablehlo.concatenate {names}, dim = 0 : ({', '.join([row] * len(inputs))}) -> {rows}")
    body.append(f'%mine = "stablehlo.reduce_scatter"(%rows) {_region(reduce, dtype)} '
                f"{{{_groups(world)}, scatter_dimension = 0 : i64}} : ({rows}) -> {row}")
    result = "%mine"
    if reduce == "avg":
        result = _average(body, "%mine", (1, numel), dtype, world)
    out = tensor_type(out_shape, dtype)
    body += [f"%out = stablehlo.reshape {result} : ({row}) -> {out}", f"return %out : {out}"]
    return runtime().compile(_module(inputs, [out], body), num_replicas=world)


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
