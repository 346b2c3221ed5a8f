"""In-kernel pieces the paged attention kernels share (decode, prefill, fused decode): where a block of keys
lives in the page pool, and one online-softmax step over it.

Keys are addressed as rows of the page pool viewed as [num_pages * page_size * KVH, D]: the row of token
`tok` of head `h` is (page * page_size + tok % page_size) * KVH + h, its page read from the row's block
table. The softmax runs in the log2 domain (scores pre-multiplied by scale * log2(e)), float32 state
(acc [rows, D], running max m [rows], running sum l [rows]).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax
from jax.experimental.pallas import triton as plgpu


def page_rows(tables_ref, table_base, tok, valid, page_size: int, kv_heads: int, head, page_offset=0):
    """int32 [BK]: pool rows of tokens `tok` (masked by `valid`) for KV head `head`; the block table of the
    sequence starts at `table_base` in the flattened tables, and its page ids count from `page_offset`."""
    page = plgpu.load(tables_ref.at[table_base + lax.div(tok, page_size)], mask=valid, other=0) + page_offset
    return (page * page_size + lax.rem(tok, page_size)) * kv_heads + head


def online_softmax_step(scores, v, carry, dtype, *, rows_may_be_empty: bool, v_scale=None):
    """Fold one block of keys into (acc, m, l).

    scores [rows, BK] float32 in the log2 domain, -inf where a key is not visible; v [BK, D]; v_scale
    [BK] (fp8 pages) or None. `rows_may_be_empty`: a row may have seen no visible key yet (causal or
    windowed masks), so its max is -inf and is replaced by 0 to keep exp2 finite.
    """
    acc, m_prev, l_prev = carry
    m_next = jnp.maximum(m_prev, jnp.max(scores, axis=1))
    m_ref = jnp.where(m_next == -jnp.inf, 0.0, m_next) if rows_may_be_empty else m_next
    correction = jnp.exp2(m_prev - m_ref)
    p = jnp.exp2(scores - m_ref[:, None])
    l_next = l_prev * correction + jnp.sum(p, axis=1)
    pv = p * v_scale[None, :] if v_scale is not None else p
    acc = acc * correction[:, None] + plgpu.dot(pv.astype(dtype), v.astype(dtype))
    return acc, m_next, l_next
