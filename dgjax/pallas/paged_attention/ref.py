"""Pure-jnp paged attention: the obviously-right version every kernel is checked against.

Each row gathers its own pages through the block table into a dense [P * page_size] key sequence; key j
of row b is visible to a query at position p iff j < context_lens[b], j <= p and (with a sliding window
W) j > p - W. Scores and softmax in float32; GQA by grouping query heads over their KV head.

Pages are either plain arrays (bf16/f16/f32) or `QuantizedPages`: fp8 e4m3 values with one float32 scale
per (slot, kv head), quantized by `write_kv` and dequantized (values * scale) before the math.
"""

from __future__ import annotations

import flax
import jax
import jax.numpy as jnp

FP8_DTYPE = jnp.dtype(jnp.float8_e4m3fn)
FP8_MAX = 448.0  # largest finite e4m3fn value; larger inputs would turn into NaN, so they are clipped


@flax.struct.dataclass
class QuantizedPages:
    """One layer's fp8 K or V pages: value[n, s, h, :] = values[n, s, h, :] * scales[n, s, h].

    Scales are float32, not bf16: a bf16 scale rounded below amax / 448 would push the row's largest element
    past 448 (clipped), and the 4 bytes per (token, kv head) are 3% of a head_dim-128 fp8 row.
    """

    values: jax.Array  # float8_e4m3fn [num_pages, page_size, KVH, D]
    scales: jax.Array  # float32 [num_pages, page_size, KVH]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.values.shape

    @property
    def dtype(self):
        return self.values.dtype


def quantize_fp8(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """x [..., D] -> (e4m3 values [..., D], float32 scales [...]) with scale = amax over D / 448 (1 for all-zero rows).

    The scale is amax * float32(1 / 448), spelled as that product because XLA rewrites division by a
    constant into it anyway; the values are x / scale, clipped to +-448 (e4m3fn would turn overflow into NaN).
    """
    x = x.astype(jnp.float32)
    scale = jnp.max(jnp.abs(x), axis=-1) * jnp.float32(1.0 / FP8_MAX)
    scale = jnp.where(scale > 0.0, scale, jnp.float32(1.0))
    values = jnp.clip(x / scale[..., None], -FP8_MAX, FP8_MAX).astype(FP8_DTYPE)
    return values, scale


def dequantize_fp8(values: jax.Array, scales: jax.Array, dtype) -> jax.Array:
    """values [..., D] * scales [...] in float32, returned in `dtype`."""
    return (values.astype(jnp.float32) * scales[..., None]).astype(dtype)


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


_BITS = {1: jnp.uint8, 2: jnp.uint16}


def as_bits(x: jax.Array) -> jax.Array:
    """Pages of a 8- or 16-bit float dtype as unsigned ints for gathers and scatters. Why: XLA's CPU backend
    computes bf16 (and fp8) gathers and scatters in float32 by converting the whole operand, i.e. the whole
    pool of every layer that shares it, at each layer (a 7x slower CPU decode tick with 32 layers per pool);
    moving bits is exact and converts nothing. float32 passes through."""
    if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype.itemsize in _BITS:
        return jax.lax.bitcast_convert_type(x, _BITS[x.dtype.itemsize])
    return x


def from_bits(x: jax.Array, dtype) -> jax.Array:
    """Inverse of `as_bits`."""
    return jax.lax.bitcast_convert_type(x, dtype) if x.dtype != dtype else x


def write_kv(
    k_pages: jax.Array, v_pages: jax.Array, k: jax.Array, v: jax.Array, slots: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Scatter k, v [B, T, KVH, D] into [num_pages, page_size, KVH, D] pages at flat `slots` [B, T]."""
    n, ps, kvh, d = k_pages.shape
    flat = slots.reshape(-1)

    def put(pages: jax.Array, x: jax.Array) -> jax.Array:
        rows = x.reshape(-1, kvh, d).astype(pages.dtype)
        out = as_bits(pages.reshape(n * ps, kvh, d)).at[flat].set(as_bits(rows))
        return from_bits(out, pages.dtype).reshape(n, ps, kvh, d)

    def put_fp8(pages: QuantizedPages, x: jax.Array) -> QuantizedPages:
        values, scales = quantize_fp8(x)
        new_scales = pages.scales.reshape(n * ps, kvh).at[flat].set(scales.reshape(-1, kvh))
        return QuantizedPages(values=put(pages.values, values), scales=new_scales.reshape(n, ps, kvh))

    if isinstance(k_pages, QuantizedPages):
        return put_fp8(k_pages, k), put_fp8(v_pages, v)
    return put(k_pages, k), put(v_pages, v)


def _gather_rows(pages, block_tables: jax.Array, dtype) -> jax.Array:
    """Each row's pages as one [B, P * page_size, KVH, D] sequence; fp8 pages dequantized to `dtype`."""
    b, p = block_tables.shape
    _, ps, kvh, d = pages.shape
    if isinstance(pages, QuantizedPages):
        values = from_bits(as_bits(pages.values)[block_tables], pages.values.dtype)
        x = dequantize_fp8(values, pages.scales[block_tables], dtype)
    else:
        x = from_bits(as_bits(pages)[block_tables], pages.dtype)
    return x.reshape(b, p * ps, kvh, d)


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
    """q [B, T, H, D] against each row's paged keys -> [B, T, H, D] in q's dtype (padding queries: 0).

    fp8 pages are dequantized to q's dtype, which then plays the page dtype's role below.
    """
    b, t, h, d = q.shape
    _, ps, kvh, _ = k_pages.shape
    p = block_tables.shape[1]
    k = _gather_rows(k_pages, block_tables, q.dtype)
    v = _gather_rows(v_pages, block_tables, q.dtype)
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
