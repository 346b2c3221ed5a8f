"""The paged-attention entry points models call; picks an implementation by platform, shape and dtype.

Only the pure-jnp reference exists so far, so every platform uses it; a GPU kernel plugs in here.
"""

from __future__ import annotations

import jax

from dgjax.pallas.paged_attention import ref


def kv_slots(positions: jax.Array, query_lens: jax.Array, block_tables: jax.Array, page_size: int) -> jax.Array:
    """int32 [B, T] flat cache slots for this step's tokens (computed once, shared by all layers)."""
    return ref.kv_slots(positions, query_lens, block_tables, page_size)


def write_kv(
    k_pages: jax.Array, v_pages: jax.Array, k: jax.Array, v: jax.Array, slots: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Store this step's k, v [B, T, KVH, D] at `slots` of one layer's pages; returns the new pages."""
    return ref.write_kv(k_pages, v_pages, k, v, slots)


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
    """Causal attention of q [B, T, H, D] over the row's pages [num_pages, page_size, KVH, D].

    Keys visible to a query at position p: positions < context_lens[b], <= p, and > p - sliding_window.
    Queries at t >= query_lens[b] are padding and return zeros.
    """
    return ref.paged_attention(
        q, k_pages, v_pages, block_tables, context_lens, positions, query_lens,
        scale=scale, sliding_window=sliding_window,
    )
