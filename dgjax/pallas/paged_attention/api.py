"""The paged-attention entry points models call; picks an implementation by platform, shape and dtype.

Dispatch of `paged_attention` (decided at trace time):
- impl "ref": the pure-jnp reference (ref.py) everywhere.
- impl "auto" (default): on a GPU, the Pallas decode kernel (kernel.py) for T == 1 and the paged prefill
  flash-attention kernel (dgjax/pallas/paged_prefill) for T > 1, each where its `supports` accepts the
  head layout and page dtype; the reference otherwise (CPU, unusual head_dim).
- impl "kernel": the same kernels on any platform (through the Pallas interpreter off GPU); with a logged
  warning, the reference for shapes a kernel does not support.
Pages are arrays or fp8 `QuantizedPages` (values + per-(slot, kv head) scales): `write_kv` quantizes into
them, the reference dequantizes them, and the decode kernel dequantizes in-kernel.
`impl=None` reads DGJAX_ATTENTION (ref | kernel | auto, default auto) at trace time, so one process can
trace both paths by setting the variable before each `jit`.
"""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp

from dgjax.pallas import paged_prefill
from dgjax.pallas.launch import choose_impl
from dgjax.pallas.paged_attention import kernel, ref
from dgjax.pallas.paged_attention.ref import (
    FP8_DTYPE,
    QuantizedPages,
    dequantize_fp8,
    quantize_fp8,
)

__all__ = [
    "FP8_DTYPE", "QuantizedPages", "dequantize_fp8", "quantize_fp8",
    "kv_slots", "write_kv", "resolve_impl", "decode_window", "paged_attention",
]

IMPLS = ("auto", "ref", "kernel")
ENV_VAR = "DGJAX_ATTENTION"
log = logging.getLogger(__name__)


def kv_slots(positions: jax.Array, query_lens: jax.Array, block_tables: jax.Array, page_size: int) -> jax.Array:
    """int32 [B, T] flat cache slots for this step's tokens (computed once, shared by all layers)."""
    return ref.kv_slots(positions, query_lens, block_tables, page_size)


def offset_pages(block_tables: jax.Array, slots: jax.Array, page_offset: int, page_size: int
                 ) -> tuple[jax.Array, jax.Array]:
    """Per-layer page ids and flat slots shifted to where the layer's pages start in a pool several layers
    share (KVCache.page_offset): what every path but the fused decode kernel (which adds it as it reads)
    hands the attention."""
    return block_tables + page_offset, slots + page_offset * page_size


def write_kv(
    k_pages: jax.Array, v_pages: jax.Array, k: jax.Array, v: jax.Array, slots: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Store this step's k, v [B, T, KVH, D] at `slots` of one layer's pages; returns the new pages.

    Pages may be `QuantizedPages` (then k, v are quantized to fp8 per token and kv head).
    """
    return ref.write_kv(k_pages, v_pages, k, v, slots)


def resolve_impl(impl: str | None) -> str:
    """The requested implementation: the argument, else $DGJAX_ATTENTION, else "auto"."""
    return choose_impl(impl, ENV_VAR, IMPLS, "attention")


def decode_window(
    context_lens: jax.Array, positions: jax.Array, query_lens: jax.Array, max_tokens: int,
    sliding_window: int | None,
) -> tuple[jax.Array, jax.Array]:
    """[start, end) of the keys a single query per row sees, with ref.py's masking rules; empty for padding."""
    pos = positions[:, 0]
    end = jnp.minimum(jnp.minimum(context_lens, pos + 1), max_tokens)
    end = jnp.where(query_lens > 0, jnp.maximum(end, 0), 0)
    start = jnp.zeros_like(end) if sliding_window is None else jnp.clip(pos - sliding_window + 1, 0, None)
    return start.astype(jnp.int32), end.astype(jnp.int32)


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
    impl: str | None = None,
) -> jax.Array:
    """Causal attention of q [B, T, H, D] over the row's pages [num_pages, page_size, KVH, D].

    Keys visible to a query at position p: positions < context_lens[b], <= p, and > p - sliding_window.
    Queries at t >= query_lens[b] are padding and return zeros.
    """
    chosen = resolve_impl(impl)
    b, t, h, d = q.shape
    _, page_size, kvh, _ = k_pages.shape
    scaled = isinstance(k_pages, QuantizedPages)
    if scaled != isinstance(v_pages, QuantizedPages):
        raise TypeError("K and V pages must both be QuantizedPages or both be arrays")
    supported = kernel.supports(h, kvh, d, k_pages.dtype) and k_pages.dtype == v_pages.dtype
    on_gpu = jax.default_backend() == "gpu"
    if chosen == "kernel" and t == 1 and not supported:
        log.warning("paged decode kernel does not support heads %d/%d x %d with pages %s/%s: using the reference",
                    h, kvh, d, k_pages.dtype, v_pages.dtype)
    if t > 1 and (chosen == "kernel" or (chosen == "auto" and on_gpu)):
        if paged_prefill.supports(h, kvh, d, k_pages.dtype, v_pages.dtype):
            return paged_prefill.paged_prefill_attention(
                q, k_pages, v_pages, block_tables, context_lens, positions, query_lens,
                scale=scale, sliding_window=sliding_window, interpret=not on_gpu,
            )
        if chosen == "kernel":
            log.warning("paged prefill kernel does not support heads %d/%d x %d with pages %s/%s: using "
                        "the reference", h, kvh, d, k_pages.dtype, v_pages.dtype)
    use_kernel = t == 1 and supported and (chosen == "kernel" or (chosen == "auto" and on_gpu))
    if not use_kernel:
        return ref.paged_attention(
            q, k_pages, v_pages, block_tables, context_lens, positions, query_lens,
            scale=scale, sliding_window=sliding_window,
        )
    start, end = decode_window(
        context_lens, positions, query_lens, block_tables.shape[1] * page_size, sliding_window
    )
    if scaled:
        out = kernel.paged_decode_attention(
            q[:, 0], k_pages.values, v_pages.values, block_tables, start, end, k_pages.scales, v_pages.scales,
            scale=scale, interpret=not on_gpu,
        )
    else:
        out = kernel.paged_decode_attention(
            q[:, 0], k_pages, v_pages, block_tables, start, end, scale=scale, interpret=not on_gpu,
        )
    return out[:, None]
