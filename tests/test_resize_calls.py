"""torch-xla's NEURON-only Resize* custom calls, served by rewriting them into ordinary HLO.

torch-xla 2.9 never sends ResizeBilinearGrad (its bilinear backward is plain HLO), so each
form is built here as torch-xla builds it (NHWC operand, backend_config "\\"<align><half_pixel>\\""),
as an HloModuleProto, and run through the C API. References: jax.image.resize and its vjp on
JAX's CPU backend (half-pixel bilinear and nearest are the same maps as torch's
align_corners=False ones); tests/test_torch_xla.py compares F.interpolate with torch-xla's CPU.
"""

import numpy as np
import pytest

import jax
import jax.extend as jex
import jax.numpy as jnp
from jax._src import core
from jax._src.interpreters import mlir

from assertions import pjrt_error
import pjrt_capi as P

RNG = np.random.RandomState(0)
X = RNG.randn(2, 3, 4, 3).astype(np.float32)        # N, H, W, C
G = RNG.randn(2, 6, 8, 3).astype(np.float32)        # a cotangent of the x2 upsampling


def _resize_call_hlo(target, operand_shape, result_shape, config, dtype=np.float32):
    """A module whose only op is the custom call, as an HloModuleProto."""
    prim = jex.core.Primitive(f"pn_test_{target}_{config}_{result_shape}")
    prim.def_abstract_eval(lambda x: core.ShapedArray(result_shape, x.dtype))

    def lower(ctx, x):
        out = mlir.aval_to_ir_type(ctx.module_context, ctx.avals_out[0])
        return mlir.custom_call(target, result_types=[out], operands=[x], backend_config=config,
                                api_version=1).results

    mlir.register_lowering(prim, lower)
    spec = jax.ShapeDtypeStruct(operand_shape, dtype)
    return jax.jit(prim.bind).lower(spec).compiler_ir("hlo").as_serialized_hlo_module_proto()


def _run(client, hlo, x):
    (outputs,) = client.compile(hlo, "hlo").execute([client.buffer_from_numpy(x)])
    return outputs[0].to_numpy()


def _jax_resize(x, shape, method):
    return jax.image.resize(x, shape, method, antialias=False)


@pytest.mark.parametrize("method,target", [("bilinear", "ResizeBilinear"), ("nearest", "ResizeNearest")])
def test_forward_matches_jax_image_resize(client, method, target):
    config = '"01"' if method == "bilinear" else '"00"'
    got = _run(client, _resize_call_hlo(target, X.shape, G.shape, config), X)
    want = np.asarray(jax.jit(_jax_resize, static_argnums=(1, 2), backend="cpu")(X, G.shape, method))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("method,target", [("bilinear", "ResizeBilinearGrad"), ("nearest", "ResizeNearestGrad")])
def test_grad_matches_vjp_of_jax_image_resize(client, method, target):
    config = '"01"' if method == "bilinear" else '"00"'
    got = _run(client, _resize_call_hlo(target, G.shape, X.shape, config), G)
    _, vjp = jax.vjp(lambda x: _jax_resize(x, G.shape, method), jax.device_put(X, jax.devices("cpu")[0]))
    (want,) = vjp(G)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-5)


def test_align_corners_bilinear_grad_is_the_transpose_of_its_forward(client):
    # <A x, g> == <x, A^T g> for the forward map A and its gradient.
    y = _run(client, _resize_call_hlo("ResizeBilinear", X.shape, G.shape, '"10"'), X)
    gx = _run(client, _resize_call_hlo("ResizeBilinearGrad", G.shape, X.shape, '"10"'), G)
    np.testing.assert_allclose(np.vdot(y, G), np.vdot(X, gx), rtol=1e-5)
    # Corners are kept exactly with align_corners.
    np.testing.assert_array_equal(y[:, [0, -1]][:, :, [0, -1]], X[:, [0, -1]][:, :, [0, -1]])


def test_bf16_operands_are_served(client):
    import ml_dtypes
    x = X.astype(ml_dtypes.bfloat16)
    got = _run(client, _resize_call_hlo("ResizeNearest", X.shape, G.shape, '"00"', dtype=ml_dtypes.bfloat16), x)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.astype(np.float32), np.repeat(np.repeat(X, 2, 1), 2, 2).astype(
        ml_dtypes.bfloat16).astype(np.float32))


def test_unknown_backend_config_is_refused_naming_the_call(client):
    hlo = _resize_call_hlo("ResizeBilinear", X.shape, G.shape, '"align"')
    with pjrt_error(P.ErrorCode.INVALID_ARGUMENT, "PJRT_Client_Compile", "ResizeBilinear", "backend_config"):
        client.compile(hlo, "hlo")
