"""Weight-consuming ops that model code calls instead of raw `@`, so weight formats can dispatch here.

Weights are stored input-major: a weight of shape [*in_dims, *out_dims] contracts x's trailing
`len(in_dims)` dimensions. Quantized weight nodes (`dgjax.quant`) stand for such a weight and take their
own branch in `matmul` (dgjax.pallas.quant_gemv: a Pallas GEMV for 1-16 rows on GPU, else the reference).
Plain weights of decode-sized products can go to dgjax.pallas.gemv (opt-in, DGJAX_GEMV=kernel), which can
also apply the RMSNorm that precedes a projection (`norm=`) in its prologue instead of a launch of its own.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from dgjax.pallas import gemv, stacked
from dgjax.pallas.quant_gemv import quant_matmul
from dgjax.quant import is_quantized


def matmul(x: jax.Array, w: jax.Array, *, contract: int = 1, out_dtype=None, norm: jax.Array | None = None,
           eps: float = 1e-6, keep_splits: bool = False, carry: bool = False, after: tuple = ()) -> Any:
    """x [..., *in] . w [*in, *out] -> [..., *out], accumulating in float32.

    The result is in `out_dtype` (default: x's dtype); pass float32 for logits. With `norm` [*in] (contract
    1 only), x is first RMS-normalized (float32, eps) and scaled by it, rounded to x's dtype, as
    `dgjax.models.blocks.rms_norm` does. `keep_splits`: a split-K quantized kernel may return its partial
    sums as a `dgjax.pallas.split_sums.SplitSums` (for a consumer kernel that sums them while loading).
    `carry`: x (after the norm) has no other reader, so a quantized kernel may take it in another dtype that its
    producer fusion writes at no cost (`quant_matmul`'s `carry`); the result's dtype does not change.
    `after`: arrays a quantized kernel takes as unread operands so it runs after their producers (an L2 prefetch of
    its weight, dgjax/pallas/l2_prefetch/api.py); ignored elsewhere.

    Both operands are flattened to one plain 2-D GEMM first: with several output dims (e.g. k/v
    projections [embed, kv_heads, head_dim]) and a single row, XLA on GPU rewrote the dot into a
    multiply that materialised an f32 [embed, kv_heads, head_dim] temporary plus a column
    reduction, which made batch-1 decode 2.2x slower per step than batch 2 (measured on an H200,
    benchmarks/gemv_layout.py and decode_bench; see benchmarks/results/).
    """
    if norm is not None and contract != 1:
        raise ValueError("matmul fuses a norm only over one contracted dim")
    if is_quantized(w):  # the kernel for decode rows on GPU, with the norm in its prologue
        return quant_matmul(x, w, contract=contract, out_dtype=out_dtype, norm=norm, eps=eps, keep_splits=keep_splits,
                            carry=carry, after=after)
    in_shape, out_shape = w.shape[:contract], w.shape[contract:]
    lead = x.shape[: x.ndim - contract]
    k = math.prod(in_shape)
    x2 = x.reshape((math.prod(lead), k))
    w2 = w.astype(x.dtype).reshape((k, math.prod(out_shape)))
    out = gemv.gemv(x2, w2, stacked.value(norm), eps=eps)  # the kernel where asked for, else rms_norm then XLA's dot
    return out.astype(out_dtype or x.dtype).reshape(lead + out_shape)


def embed_lookup(table: jax.Array, tokens: jax.Array) -> jax.Array:
    """Rows of an embedding table [vocab, embed] for int tokens."""
    return jnp.take(table, tokens, axis=0)
