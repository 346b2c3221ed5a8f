"""Entry point of the paged prefill kernel: ref.py's `paged_attention` semantics for chunks of T > 1 queries.

The paged_attention dispatch calls `supports` at trace time and, when it holds, `paged_prefill_attention`
with the same arguments it would give the reference. Pages are arrays (bf16/f16/f32) or fp8
`QuantizedPages` (values + per-(slot, kv head) scales, dequantized in-kernel).
"""

from __future__ import annotations

import jax

from dgjax.pallas.paged_attention.ref import QuantizedPages
from dgjax.pallas.paged_prefill import kernel

__all__ = ["paged_prefill_attention", "supports"]


def supports(num_heads: int, kv_heads: int, head_dim: int, k_page_dtype, v_page_dtype=None) -> bool:
    """True when the kernel handles this head layout and these page dtypes (K and V must match)."""
    same = v_page_dtype is None or jax.numpy.dtype(v_page_dtype) == jax.numpy.dtype(k_page_dtype)
    return same and kernel.supports(num_heads, kv_heads, head_dim, k_page_dtype)


def paged_prefill_attention(
    q: jax.Array,
    k_pages,
    v_pages,
    block_tables: jax.Array,
    context_lens: jax.Array,
    positions: jax.Array,
    query_lens: jax.Array,
    *,
    scale: float,
    sliding_window: int | None = None,
    interpret: bool = False,
    **knobs,
) -> jax.Array:
    """Causal attention of q [B, T, H, D] over each row's pages [num_pages, page_size, KVH, D] -> [B, T, H, D].

    Keys visible to query t of row b (at positions[b, t]): key positions < context_lens[b], <= positions[b, t]
    and > positions[b, t] - sliding_window, read through block_tables[b]; queries at t >= query_lens[b]
    return zeros. `knobs` (block_m, block_k, num_warps, num_stages) tune the launch.
    """
    scaled = isinstance(k_pages, QuantizedPages)
    if scaled != isinstance(v_pages, QuantizedPages):
        raise TypeError("K and V pages must both be QuantizedPages or both be arrays")
    args = (q, k_pages, v_pages, block_tables, context_lens, positions, query_lens)
    if scaled:
        args = (q, k_pages.values, v_pages.values, block_tables, context_lens, positions, query_lens,
                k_pages.scales, v_pages.scales)
    return kernel.paged_prefill_attention_pages(
        *args, scale=scale, sliding_window=sliding_window, interpret=interpret, **knobs
    )
