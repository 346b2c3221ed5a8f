"""Paged causal flash attention for prefill chunks (T > 1 queries per row), Pallas with the Triton lowering.

Why this shape:
- One program per (row, kv head, query block). The query block holds the rows of all q heads of the GQA
  group for `block_m / group` consecutive tokens, flattened token-major into one [block_m, D] tile
  (row r = token r // gp, head r % gp). K and V tiles are then loaded once per group and every dot has
  M = block_m (tensor cores stay busy even at group 8). Groups that are no power of two are padded to the
  next one (zero queries whose rows are dropped) because Triton tiles must be powers of two.
- Work and HBM reads follow each query block's visible key interval [lo, hi), computed in jnp from the
  block's real query positions: hi = min(context, last position + 1, table width) (causal skip: no key
  block after the block's last query is touched), lo = first position - window + 1 with a sliding
  window, else 0. Key page ids are looked up in the block table per token, loads past hi are masked, so
  slots the row does not use are never read. Inside the interval each score is masked per (query, key)
  with ref.py's rules (key <= query position, inside the window); padding queries get position -1 and
  therefore no keys, and return zeros.
- Query blocks run last-first: at a chunk's start the later blocks have the longest key intervals, and
  launching them first leaves short programs for the tail wave.
- Online softmax in float32 in the log2 domain (exp2 with log2(e) folded into the scale). A query row can
  have no visible key in a whole key block (sliding window, padding), so the running max is replaced by 0
  while it is still -inf, to keep exp2(-inf - -inf) = NaN out of the accumulator.
- q is cast to the page dtype and probabilities to the value dtype before the dots, as in ref.py, but
  unnormalised (<= 1, divided at the end) where ref.py casts normalised ones: bf16 pages agree to bf16
  rounding. fp8 (e4m3) pages are handled as in the decode kernel: tiles converted to q's dtype in
  registers, key scales multiply score columns, value scales multiply probability columns.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas.online_softmax import online_softmax_step, page_rows
from dgjax.pallas.paged_attention.kernel import load_tile

_LOG2E = math.log2(math.e)
MIN_DOT_ROWS = 16  # Triton's dot needs every dimension >= 16
SUPPORTED_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16), jnp.dtype(jnp.float32))
SCALED_DTYPES = (jnp.dtype(jnp.float8_e4m3fn),)  # pages that need k_scale / v_scale
MAX_GROUP = 32  # q heads per KV head; the query tile still holds >= 4 tokens at block_m 128


def supports(num_heads: int, kv_heads: int, head_dim: int, page_dtype) -> bool:
    """Whether the kernel handles this head layout and page dtype (else use the reference)."""
    pow2 = head_dim & (head_dim - 1) == 0
    return (
        num_heads % kv_heads == 0
        and num_heads // kv_heads <= MAX_GROUP
        and pow2
        and 16 <= head_dim <= 256
        and jnp.dtype(page_dtype) in SUPPORTED_DTYPES + SCALED_DTYPES
    )


def default_block_m(head_dim: int) -> int:
    """Query rows per program: 128 keeps the [M, D] float32 accumulator in registers up to D = 128."""
    return 128 if head_dim <= 128 else 64


def query_block_windows(
    context_lens: jax.Array, positions: jax.Array, query_lens: jax.Array, block_q: int, max_tokens: int,
    sliding_window: int | None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per query block: (lo, hi) int32 [B, NQB] key interval, and per-token positions [B, NQB * block_q].

    Padding tokens (t >= query_lens[b], and the tail added to fill the last block) get position -1: they
    see no key, and do not widen their block's interval. A block without real tokens has lo = hi = 0.
    """
    b, t = positions.shape
    nqb = pl.cdiv(t, block_q)
    real = jnp.arange(t)[None, :] < query_lens[:, None]
    pos = jnp.where(real, positions, -1).astype(jnp.int32)
    pos = jnp.pad(pos, ((0, 0), (0, nqb * block_q - t)), constant_values=-1)
    blocks = pos.reshape(b, nqb, block_q)
    last = jnp.max(blocks, axis=-1)
    first = jnp.min(jnp.where(blocks >= 0, blocks, jnp.iinfo(jnp.int32).max), axis=-1)
    hi = jnp.minimum(jnp.minimum(context_lens[:, None], last + 1), max_tokens)
    hi = jnp.where(last >= 0, jnp.maximum(hi, 0), 0)
    lo = jnp.zeros_like(hi) if sliding_window is None else jnp.clip(first - sliding_window + 1, 0, None)
    lo = jnp.where(last >= 0, jnp.minimum(lo, hi), 0)
    return lo.astype(jnp.int32), hi.astype(jnp.int32), pos


def _prefill_kernel(
    lo_ref, hi_ref, tables_ref, pos_ref, q_ref, k_ref, v_ref, *refs,
    kv_heads: int, page_size: int, pages_per_row: int, num_q_blocks: int, block_k: int,
    scale_log2: float, sliding_window: int | None, scaled: bool,
):
    ks_ref, vs_ref, o_ref = refs if scaled else (None, None, refs[0])
    b, h = pl.program_id(0), pl.program_id(1)
    qb = num_q_blocks - 1 - pl.program_id(2)  # the longest key intervals first: a shorter tail wave
    lo = lo_ref[b * num_q_blocks + qb]
    hi = hi_ref[b * num_q_blocks + qb]
    num_blocks = pl.cdiv(jnp.maximum(hi - lo, 0), block_k)

    q = q_ref[...]  # [BM, D] in the compute dtype
    q_pos = pos_ref[...]  # [BM] int32, -1 for padding
    rows, head_dim = q.shape
    offsets = lax.broadcasted_iota(jnp.int32, (block_k,), 0)
    cols = lax.broadcasted_iota(jnp.int32, (1, head_dim), 1)

    def body(i, carry):
        tok = lo + i * block_k + offsets
        valid = tok < hi
        flat = page_rows(tables_ref, b * pages_per_row, tok, valid, page_size, kv_heads, h)
        row = flat[:, None]
        valid2 = jnp.broadcast_to(valid[:, None], (block_k, head_dim))
        # Both indices as arrays ([BK, 1] x [1, D]): a gather the interpreter can also run.
        k = load_tile(k_ref, row, cols, valid2, scaled, q.dtype)
        v = load_tile(v_ref, row, cols, valid2, scaled, q.dtype)

        scores = plgpu.dot(q, k.astype(q.dtype), trans_b=True)  # [BM, BK] f32
        v_scale = None
        if scaled:
            k_scale = plgpu.load(ks_ref.at[flat], mask=valid, other=0.0)
            v_scale = plgpu.load(vs_ref.at[flat], mask=valid, other=0.0)
            scores = scores * k_scale[None, :]
        visible = valid[None, :] & (tok[None, :] <= q_pos[:, None])
        if sliding_window is not None:
            visible &= tok[None, :] > q_pos[:, None] - sliding_window
        scores = jnp.where(visible, scores * scale_log2, -jnp.inf)  # log2 domain
        return online_softmax_step(scores, v, carry, q.dtype, rows_may_be_empty=True, v_scale=v_scale)

    init = (
        jnp.zeros((rows, head_dim), jnp.float32),
        jnp.full((rows,), -jnp.inf, jnp.float32),
        jnp.zeros((rows,), jnp.float32),
    )
    acc, _, l = lax.fori_loop(0, num_blocks, body, init)
    denom = jnp.where(l == 0.0, 1.0, l)
    o_ref[...] = (acc / denom[:, None]).astype(o_ref.dtype)


@functools.partial(
    jax.jit,
    static_argnames=("scale", "sliding_window", "block_m", "block_k", "num_warps", "num_stages", "interpret"),
)
def paged_prefill_attention_pages(
    q: jax.Array,
    k_pages: jax.Array,
    v_pages: jax.Array,
    block_tables: jax.Array,
    context_lens: jax.Array,
    positions: jax.Array,
    query_lens: jax.Array,
    k_scale: jax.Array | None = None,
    v_scale: jax.Array | None = None,
    *,
    scale: float,
    sliding_window: int | None = None,
    block_m: int | None = None,
    block_k: int = 64,
    num_warps: int | None = None,
    num_stages: int = 2,
    interpret: bool = False,
) -> jax.Array:
    """q [B, T, H, D] against plain page arrays [num_pages, page_size, KVH, D] -> [B, T, H, D] (ref.py rules).

    fp8 pages need k_scale and v_scale, float32 [num_pages, page_size, KVH]; the math then runs in q's dtype.
    block_m: query rows (tokens x padded group) per program, a power of two >= 16.
    """
    scaled = jnp.dtype(k_pages.dtype) in SCALED_DTYPES
    if scaled != (k_scale is not None and v_scale is not None):
        raise ValueError(f"{k_pages.dtype} pages {'need' if scaled else 'take no'} k_scale and v_scale")
    compute = q.dtype if scaled else k_pages.dtype
    b, t, h, d = q.shape
    n, ps, kvh, _ = k_pages.shape
    p = block_tables.shape[1]
    g = h // kvh
    gp = pl.next_power_of_2(g)
    bm = block_m or default_block_m(d)
    bm = max(MIN_DOT_ROWS, gp, min(bm, pl.next_power_of_2(t * gp)))  # no bigger than the chunk needs
    bq = bm // gp  # tokens per query block
    lo, hi, pos = query_block_windows(context_lens, positions, query_lens, bq, p * ps, sliding_window)
    nqb = lo.shape[1]
    tp = nqb * bq

    # [B, T, H, D] -> [B, KVH, T * gp, D], token-major inside a kv head (row = token * gp + head).
    qg = q.astype(compute).reshape(b, t, kvh, g, d).transpose(0, 2, 1, 3, 4)
    qg = jnp.pad(qg, ((0, 0), (0, 0), (0, tp - t), (0, gp - g), (0, 0))).reshape(b, kvh, tp * gp, d)
    row_pos = jnp.repeat(pos, gp, axis=1)  # [B, tp * gp]
    k_rows = k_pages.reshape(n * ps * kvh, d)  # row (slot * KVH + head): a free reshape
    v_rows = v_pages.reshape(n * ps * kvh, d)
    tables = block_tables.astype(jnp.int32).reshape(b * p)

    whole = lambda shape: pl.BlockSpec(shape, lambda *_: (0,) * len(shape))  # noqa: E731
    in_specs = [
        whole((b * nqb,)), whole((b * nqb,)), whole((b * p,)),
        pl.BlockSpec((None, bm), lambda i, j, s: (i, nqb - 1 - s)),
        pl.BlockSpec((None, None, bm, d), lambda i, j, s: (i, j, nqb - 1 - s, 0)),
        whole(k_rows.shape), whole(v_rows.shape),
    ]
    scale_rows = ()
    if scaled:  # row (slot * KVH + head), like the pages
        scale_rows = (k_scale.astype(jnp.float32).reshape(-1), v_scale.astype(jnp.float32).reshape(-1))
        in_specs += [whole(scale_rows[0].shape), whole(scale_rows[1].shape)]
    kernel = functools.partial(
        _prefill_kernel, kv_heads=kvh, page_size=ps, pages_per_row=p, num_q_blocks=nqb, block_k=block_k,
        scale_log2=scale * _LOG2E, sliding_window=sliding_window, scaled=scaled,
    )
    out = pl.pallas_call(
        kernel,
        grid=(b, kvh, nqb),
        in_specs=in_specs,
        out_specs=pl.BlockSpec((None, None, bm, d), lambda i, j, s: (i, j, nqb - 1 - s, 0)),
        out_shape=jax.ShapeDtypeStruct((b, kvh, tp * gp, d), q.dtype),
        compiler_params=plgpu.CompilerParams(
            num_warps=num_warps or (8 if bm >= 128 else 4), num_stages=num_stages
        ),
        interpret=interpret,
        name=f"paged_prefill_attention_g{gp}_d{d}_bm{bm}_bk{block_k}{'_fp8' if scaled else ''}",
    )(lo.reshape(-1), hi.reshape(-1), tables, row_pos, qg, k_rows, v_rows, *scale_rows)

    out = out.reshape(b, kvh, tp, gp, d)[:, :, :t, :g].transpose(0, 2, 1, 3, 4)
    return out.reshape(b, t, h, d)
