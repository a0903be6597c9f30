"""The native device's own small programs, written as StableHLO: reading a strided view of a
storage into a dense tensor and writing one back. Each is compiled once per shape and kept."""

from __future__ import annotations

import functools
import math

import torch

from pjrt_neuron.torch_native._runtime import runtime

ELEMENT_TYPES = {
    torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16", torch.int64: "i64",
    torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "ui8", torch.bool: "i1",
}


def tensor_type(shape, dtype: torch.dtype) -> str:
    dims = "".join(f"{n}x" for n in shape)
    return f"tensor<{dims}{ELEMENT_TYPES[dtype]}>"


def _module(inputs: list[str], output: str, body: list[str]) -> str:
    params = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(inputs))
    lines = "\n    ".join(body)
    return f"module {{\n  func.func @main({params}) -> {output} {{\n    {lines}\n  }}\n}}\n"


def _is_contiguous_run(size, stride) -> bool:
    step = 1
    for n, st in zip(reversed(tuple(size)), reversed(tuple(stride))):
        if n != 1 and st != step:
            return False
        step *= n
    return True


def _flat_indices(size, stride, offset, body: list[str]) -> str:
    """Appends ops computing offset + sum(i_k * stride_k) over `size`, as (size..., 1) i64 indices."""
    index_type = tensor_type(size, torch.int64)
    body.append(f"%off = stablehlo.constant dense<{offset}> : {index_type}")
    acc = "%off"
    for dim, st in enumerate(stride):
        if size[dim] == 1 or st == 0:
            continue
        body += [f"%iota{dim} = stablehlo.iota dim = {dim} : {index_type}",
                 f"%st{dim} = stablehlo.constant dense<{st}> : {index_type}",
                 f"%term{dim} = stablehlo.multiply %iota{dim}, %st{dim} : {index_type}",
                 f"%acc{dim} = stablehlo.add {acc}, %term{dim} : {index_type}"]
        acc = f"%acc{dim}"
    column_type = tensor_type((*size, 1), torch.int64)
    body.append(f"%idx = stablehlo.reshape {acc} : ({index_type}) -> {column_type}")
    return column_type


@functools.lru_cache(maxsize=None)
def reshape(storage_shape, size, dtype):
    source, target = tensor_type(storage_shape, dtype), tensor_type(size, dtype)
    text = _module([source], target, [f"%0 = stablehlo.reshape %arg0 : ({source}) -> {target}",
                                      f"return %0 : {target}"])
    return runtime().compile(text)


def _flat_storage(storage_shape, size, dtype):
    """Types of the storage, of it flattened and of the view; the body's first op flattens it."""
    source = tensor_type(storage_shape, dtype)
    flat = tensor_type((math.prod(storage_shape),), dtype)
    return source, flat, tensor_type(size, dtype), [f"%flat = stablehlo.reshape %arg0 : ({source}) -> {flat}"]


@functools.lru_cache(maxsize=None)
def read_view(storage_shape, size, stride, offset, dtype):
    source, flat, target, body = _flat_storage(storage_shape, size, dtype)
    count = math.prod(size)
    if _is_contiguous_run(size, stride):
        run = tensor_type((count,), dtype)
        body += [f"%run = stablehlo.slice %flat [{offset}:{offset + count}] : ({flat}) -> {run}",
                 f"%0 = stablehlo.reshape %run : ({run}) -> {target}"]
    else:
        column_type = _flat_indices(size, stride, offset, body)
        body.append(
            f'%0 = "stablehlo.gather"(%flat, %idx) {{dimension_numbers = #stablehlo.gather<'
            f"collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = {len(size)}>, "
            f"slice_sizes = array<i64: 1>, indices_are_sorted = false}} : ({flat}, {column_type}) -> {target}")
    body.append(f"return %0 : {target}")
    return runtime().compile(_module([source], target, body))


@functools.lru_cache(maxsize=None)
def write_view(storage_shape, size, stride, offset, dtype):
    source, flat, update, body = _flat_storage(storage_shape, size, dtype)
    count = math.prod(size)
    if _is_contiguous_run(size, stride):
        run = tensor_type((count,), dtype)
        start = tensor_type((), torch.int64)
        body += [f"%run = stablehlo.reshape %arg1 : ({update}) -> {run}",
                 f"%start = stablehlo.constant dense<{offset}> : {start}",
                 f"%new = stablehlo.dynamic_update_slice %flat, %run, %start : ({flat}, {run}, {start}) -> {flat}"]
    else:
        column_type = _flat_indices(size, stride, offset, body)
        scalar = tensor_type((), dtype)
        body.append(
            f'%new = "stablehlo.scatter"(%flat, %idx, %arg1) ({{\n'
            f"    ^bb0(%old: {scalar}, %upd: {scalar}):\n      stablehlo.return %upd : {scalar}\n    }}) "
            f"{{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
            f"scatter_dims_to_operand_dims = [0], index_vector_dim = {len(size)}>, indices_are_sorted = false, "
            f"unique_indices = false}} : ({flat}, {column_type}, {update}) -> {flat}")
    body += [f"%0 = stablehlo.reshape %new : ({flat}) -> {source}", f"return %0 : {source}"]
    return runtime().compile(_module([source, update], source, body))
