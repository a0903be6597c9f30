"""`torch.autocast("neuron", dtype=torch.bfloat16)`: the op lists CUDA's autocast uses. PyTorch
registers autocast kernels for its own devices only; a PrivateUse1 device brings its own, or every
op fails under autocast for want of a kernel at that dispatch key."""

from __future__ import annotations

import torch

# Matrix products and convolutions run in the autocast type, as on CUDA.
LOWER_PRECISION = (
    "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "_convolution", "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv",
    "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot",
    "scaled_dot_product_attention", "_scaled_dot_product_attention_math",
)
# Ops whose range or accumulation needs float32, as on CUDA.
FLOAT32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal",
    "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm", "group_norm",
    "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss",
    "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss",
    "mse_loss", "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "softmax", "log_softmax", "cross_entropy_loss", "cumsum", "cumprod", "prod", "sum", "nansum",
    "linalg_vector_norm",
)

_EXCLUDE_AUTOCAST = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)


def _castable(value) -> bool:
    return (isinstance(value, torch.Tensor) and value.device.type == "neuron" and value.is_floating_point()
            and value.dtype != torch.float64)


def _cast(value, dtype):
    if _castable(value):
        return value if value.dtype == dtype else value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _kernel(op, to_float32: bool):
    def run_with_autocast(*args, **kwargs):
        dtype = torch.float32 if to_float32 else torch.get_autocast_dtype("neuron")
        args = _cast(args, dtype)
        kwargs = {k: _cast(v, dtype) for k, v in kwargs.items()}
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE_AUTOCAST):
            return op(*args, **kwargs)

    return run_with_autocast


def install(library: torch.library.Library) -> None:
    """Every other op passes through the autocast key unchanged."""
    global _fallthrough
    _fallthrough = torch.library.Library("_", "IMPL")
    _fallthrough.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    for names, to_float32 in ((LOWER_PRECISION, False), (FLOAT32, True)):
        for name in names:
            packet = getattr(torch.ops.aten, name, None)
            if packet is None:
                continue
            for overload in packet.overloads():
                op = getattr(packet, overload)
                qualified = name if overload == "default" else f"{name}.{overload}"
                library.impl(qualified, _kernel(op, to_float32), "AutocastPrivateUse1")


_fallthrough = None
