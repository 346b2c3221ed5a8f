"""Pure-jnp paged attention: the obviously-right version every kernel is checked against.

Each row gathers its own pages through the block table into a dense [P * page_size] key sequence; key j
of row b is visible to a query at position p iff j < context_lens[b], j <= p and (with a sliding window
W) j > p - W. Scores and softmax in float32; GQA by grouping query heads over their KV head.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def kv_slots(positions: jax.Array, query_lens: jax.Array, block_tables: jax.Array, page_size: int) -> jax.Array:
    """Flat cache slot of every token [B, T]; padding tokens (t >= query_lens[b]) get trash-page slots."""
    _, t = positions.shape
    num_blocks = block_tables.shape[1]
    block = jnp.clip(positions // page_size, 0, num_blocks - 1)
    page = jnp.take_along_axis(block_tables, block, axis=1)
    slot = page * page_size + positions % page_size
    real = jnp.arange(t)[None, :] < query_lens[:, None]
    trash = jnp.broadcast_to(jnp.arange(t) % page_size, slot.shape)
    return jnp.where(real, slot, trash).astype(jnp.int32)


def write_kv(
    k_pages: jax.Array, v_pages: jax.Array, k: jax.Array, v: jax.Array, slots: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Scatter k, v [B, T, KVH, D] into [num_pages, page_size, KVH, D] pages at flat `slots` [B, T]."""
    n, ps, kvh, d = k_pages.shape
    flat = slots.reshape(-1)

    def put(pages: jax.Array, x: jax.Array) -> jax.Array:
        out = pages.reshape(n * ps, kvh, d).at[flat].set(x.reshape(-1, kvh, d).astype(pages.dtype))
        return out.reshape(n, ps, kvh, d)

    return put(k_pages, k), put(v_pages, v)


def paged_attention(
    q: jax.Array,
    k_pages: jax.Array,
    v_pages: jax.Array,
    block_tables: jax.Array,
    context_lens: jax.Array,
    positions: jax.Array,
    query_lens: jax.Array,
    *,
    scale: float,
    sliding_window: int | None = None,
) -> jax.Array:
    """q [B, T, H, D] against each row's paged keys -> [B, T, H, D] in q's dtype (padding queries: 0)."""
    b, t, h, d = q.shape
    _, ps, kvh, _ = k_pages.shape
    p = block_tables.shape[1]
    k = k_pages[block_tables].reshape(b, p * ps, kvh, d)
    v = v_pages[block_tables].reshape(b, p * ps, kvh, d)
    qg = q.astype(k.dtype).reshape(b, t, kvh, h // kvh, d)
    s = jnp.einsum("btkgd,bskd->bkgts", qg, k, preferred_element_type=jnp.float32) * scale

    key_pos = jnp.arange(p * ps)[None, None, :]
    q_pos = positions[:, :, None]
    mask = (key_pos < context_lens[:, None, None]) & (key_pos <= q_pos)
    if sliding_window is not None:
        mask &= key_pos > q_pos - sliding_window
    mask &= (jnp.arange(t) < query_lens[:, None])[:, :, None]
    mask = mask[:, None, None]  # [B, 1, 1, T, S]

    s = jnp.where(mask, s, -jnp.inf)
    m = jnp.max(s, axis=-1, keepdims=True)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    e = jnp.where(mask, jnp.exp(s - m), 0.0)
    denom = jnp.sum(e, axis=-1, keepdims=True)
    # Like transformers' eager attention: float32 softmax, probabilities cast to the value dtype.
    probs = (e / jnp.where(denom == 0.0, 1.0, denom)).astype(v.dtype)
    out = jnp.einsum("bkgts,bskd->btkgd", probs, v, preferred_element_type=jnp.float32)
    return out.reshape(b, t, h, d).astype(q.dtype)
