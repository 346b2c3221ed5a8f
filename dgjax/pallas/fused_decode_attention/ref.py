"""Reference for the fused decode step of attention: split the fused qkv projection, optional q/k RMSNorm,
rotary embedding, write this token's K/V into its page slot, paged attention over the row's keys.

Composed from the plain paged-attention reference (dgjax/pallas/paged_attention/ref.py) plus jnp norm and
rope with the model's rounding: norm and rope math in float32, each result rounded to the qkv dtype,
as dgjax.models.blocks does in the unfused path.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dgjax.pallas.gemv.ref import rms_norm
from dgjax.pallas.paged_attention import ref as paged_ref


def rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate-half rope on the first cos.shape[-1] features of x [B, heads, D]; cos, sin [B, R]."""
    rot, half = cos.shape[-1], cos.shape[-1] // 2
    xf = x.astype(jnp.float32)
    xr, xpass = xf[..., :rot], xf[..., rot:]
    rotated = jnp.concatenate([-xr[..., half:], xr[..., :half]], axis=-1)
    out = xr * cos[:, None, :] + rotated * sin[:, None, :]
    return jnp.concatenate([out, xpass], axis=-1).astype(x.dtype)


def split_qkv(qkv: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """qkv [B, KVH, G + 2, D] -> q [B, KVH * G, D], k [B, KVH, D], v [B, KVH, D]."""
    b, kvh, g2, d = qkv.shape
    return qkv[:, :, : g2 - 2].reshape(b, kvh * (g2 - 2), d), qkv[:, :, g2 - 2], qkv[:, :, g2 - 1]


def fused_decode_attention(
    qkv, cos, sin, k_pages, v_pages, block_tables, context_lens, positions, query_lens, slots, *,
    scale: float, eps: float = 1e-6, q_norm=None, k_norm=None, sliding_window: int | None = None,
):
    """One decode token per row. qkv [B, KVH, G+2, D] (the fused projection's output); cos, sin float32
    [B, R]; positions [B, 1]; slots [B, 1] (this token's flat cache slot). Returns (out [B, H, D], k_pages,
    v_pages) with this token's K/V written."""
    q, k, v = split_qkv(qkv)
    if q_norm is not None:
        q, k = rms_norm(q, q_norm, eps), rms_norm(k, k_norm, eps)
    q, k = rope(q, cos, sin), rope(k, cos, sin)
    k_pages, v_pages = paged_ref.write_kv(k_pages, v_pages, k[:, None], v[:, None], slots)
    out = paged_ref.paged_attention(
        q[:, None], k_pages, v_pages, block_tables, context_lens, positions, query_lens,
        scale=scale, sliding_window=sliding_window,
    )
    return out[:, 0], k_pages, v_pages
