"""The truth for the quantized GEMV: dequantize the whole weight in float32, round to x's dtype, one dot.

This is `dgjax.quant.reference_matmul` on 2-D x (what `ops.matmul` ran for every quantized node before the
kernel existed); the kernel must match it to a stated tolerance.
"""

from __future__ import annotations

from typing import Any

import jax

from dgjax.pallas.gemv.ref import rms_norm
from dgjax.quant import fp8_block, reference_matmul


def quant_gemv(x: jax.Array, w: Any, norm: jax.Array | None = None, *, out_dtype: Any = None,
               eps: float = 1e-6, a8_group: int | None = None, a8_terms: int = 1) -> jax.Array:
    """x [rows, K] . w (dense [*in, *out], K = prod(in)) -> [rows, N], N = prod(out), float32 accumulation;
    with `norm` [K], x is RMS-normalized first (float32, rounded to x's dtype, as the models' rms_norm);
    with `a8_group` (the kernel's K step under DGJAX_FP8_DOT=a8), x is then rounded as the fp8 x fp8 dot
    rounds it (`fp8_block.round_activations`; `a8_terms` 2 for DGJAX_FP8_DOT=a8x2)."""
    if norm is not None:
        x = rms_norm(x, norm, eps)
    if a8_group is not None:
        x = fp8_block.round_activations(x, a8_group, a8_terms)
    x_in = x.reshape((x.shape[0],) + w.in_shape)
    return reference_matmul(x_in, w, contract=w.in_dims, out_dtype=out_dtype).reshape(x.shape[0], w.n)
