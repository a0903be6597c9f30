"""The decompositions an op is traced with before torch-mlir lowers it: torch-mlir's table, with
PyTorch's own where torch-mlir has no StableHLO lowering, per-tensor forms of the foreach ops, and
our own where torch-mlir's would compute in float64 or lower nothing."""

from __future__ import annotations

import functools

import torch
import torch._decomp


@functools.lru_cache(maxsize=None)
def decompositions(wide: bool):
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
