"""Paged decode attention (one query token per row) as a Pallas kernel with the Triton lowering.

Why this shape:
- Work and HBM reads follow each row's visible key interval [kv_start, kv_end), not the block table's
  width: a program loops over `block_tokens` keys at a time with a dynamic trip count, looks the
  keys' page ids up in the block table and loads only those K/V rows (masked loads past the end read
  nothing). A sliding window simply moves kv_start, so pages before the window are never touched.
- One program per (row, kv head, split) processes all q heads of the GQA group together: K and V are
  read once per group. The group is padded to 16 query rows (the next power of two above that, up to
  32) because Triton's `dot` needs M >= 16. The padding costs tensor-core work only: 16 FLOP per K/V
  byte against ~200 the H200 can do per byte. Elementwise multiply + reduce would instead put G FMAs
  per loaded element and cross-thread reductions on the CUDA cores: about a third of their fp32 peak
  at G=4 and full HBM speed before the reductions, and worse for G=8 or 12 (Qwen3-Next, GLM).
- Split-K (flash-decoding): the interval is cut into `num_splits` equal, block-aligned pieces, so that
  batch 1 with 8 KV heads still puts work on every SM at long contexts. Each split writes its unnormalised
  accumulator plus (max, sum) of its scores, merged by dgjax/pallas/split_merge (one small kernel at batch <= 2).
  With one split the kernel normalises in place and no second pass runs.
- Scores and softmax are float32 (exp2 with log2(e) folded into the scale); q is cast to the page dtype
  and probabilities to the value dtype before the dots, as in ref.py, but unnormalised (<= 1, divided
  at the end) where ref.py casts normalised ones: with bf16 pages the two agree to bf16 rounding.
- fp8 (e4m3) pages come with a float32 scale per (slot, kv head). The kernel loads the fp8 tile and the
  tile's scale row, converts the tile to q's dtype (exact: every e4m3 value is a bf16 value) and applies
  the scales where they cost G x BK multiplies instead of BK x D: a key's scale multiplies its score
  column, a value's scale multiplies its probability column before the P.V dot (the softmax sum uses the
  unscaled probabilities). ref.py multiplies the pages instead; the two agree to q-dtype rounding.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas.launch import target_programs
from dgjax.pallas.online_softmax import online_softmax_step, page_rows
from dgjax.pallas.split_merge import api as split_merge

_LOG2E = math.log2(math.e)
MIN_DOT_ROWS = 16  # Triton's dot needs every dimension >= 16
SUPPORTED_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16), jnp.dtype(jnp.float32))
SCALED_DTYPES = (jnp.dtype(jnp.float8_e4m3fn),)  # pages that need k_scale / v_scale
MAX_GROUP = 32  # q heads per KV head; a larger group's [G, D] accumulator would spill registers


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


def default_block_tokens(head_dim: int, page_dtype) -> int:
    """Keys per loop iteration: a 16 KB K tile (and one for V) per step keeps loads wide."""
    return max(16, min(128, 16384 // (head_dim * jnp.dtype(page_dtype).itemsize)))


def default_num_splits(batch: int, kv_heads: int, max_tokens: int, block_tokens: int,
                       programs: int | None = None) -> int:
    """Splits per (row, kv head) so that the grid has about `programs` programs (one split per block at most).

    Fixed at trace time from the table width; the split length itself follows each row's real context,
    so at short contexts the surplus splits find no keys and exit at once.
    """
    programs = programs or target_programs()
    max_blocks = max(1, pl.cdiv(max_tokens, block_tokens))
    return max(1, min(max_blocks, pl.cdiv(programs, batch * kv_heads)))


def load_tile(ref, row, cols, mask, scaled: bool, dtype):
    """A [BK, D] page tile in `dtype`, zero where `mask` is off.

    fp8 tiles load without a fill value (Triton cannot splat one into e4m3) and are zeroed after the
    conversion: masked lanes of a load are undefined and could hold an e4m3 NaN pattern.
    """
    if scaled:
        return jnp.where(mask, plgpu.load(ref.at[row, cols], mask=mask).astype(dtype), 0)
    return plgpu.load(ref.at[row, cols], mask=mask, other=0).astype(dtype)


def _decode_kernel(
    lo_ref, hi_ref, tables_ref, q_ref, k_ref, v_ref, *refs,
    kv_heads: int, page_size: int, pages_per_row: int, block_tokens: int, num_splits: int,
    scale_log2: float, normalize: bool, scaled: bool,
):
    ks_ref, vs_ref = refs[:2] if scaled else (None, None)
    out_refs = refs[2:] if scaled else refs
    b, h, s = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    lo = lo_ref[b]
    hi = hi_ref[b]
    per_split = pl.cdiv(pl.cdiv(jnp.maximum(hi - lo, 0), num_splits), block_tokens) * block_tokens
    start = lo + s * per_split
    end = jnp.minimum(hi, start + per_split)
    num_blocks = pl.cdiv(jnp.maximum(end - start, 0), block_tokens)

    q = q_ref[...]  # [GP, D], already in the page dtype (q's own dtype for fp8 pages)
    rows, head_dim = q.shape
    offsets = lax.broadcasted_iota(jnp.int32, (block_tokens,), 0)
    cols = lax.broadcasted_iota(jnp.int32, (1, head_dim), 1)

    def body(i, carry):
        tok = start + i * block_tokens + offsets
        valid = tok < end
        flat = page_rows(tables_ref, b * pages_per_row, tok, valid, page_size, kv_heads, h)
        row = flat[:, None]
        valid2 = jnp.broadcast_to(valid[:, None], (block_tokens, head_dim))
        # Both indices as arrays ([BK, 1] x [1, D]): a gather the interpreter can also run.
        k = load_tile(k_ref, row, cols, valid2, scaled, q.dtype)
        v = load_tile(v_ref, row, cols, valid2, scaled, q.dtype)

        scores = plgpu.dot(q, k.astype(q.dtype), trans_b=True)  # [GP, BK] f32
        v_scale = None
        if scaled:
            k_scale = plgpu.load(ks_ref.at[flat], mask=valid, other=0.0)
            v_scale = plgpu.load(vs_ref.at[flat], mask=valid, other=0.0)
            scores = scores * k_scale[None, :]
        scores = jnp.where(valid[None, :], scores * scale_log2, -jnp.inf)  # log2 domain
        # every block of a decode row holds a visible key (the interval is cut to it)
        return online_softmax_step(scores, v, carry, q.dtype, rows_may_be_empty=False, v_scale=v_scale)

    init = (
        jnp.zeros((rows, head_dim), jnp.float32),
        jnp.full((rows,), -jnp.inf, jnp.float32),
        jnp.zeros((rows,), jnp.float32),
    )
    acc, m, l = lax.fori_loop(0, num_blocks, body, init)

    if normalize:
        (o_ref,) = out_refs
        denom = jnp.where(l == 0.0, 1.0, l)
        o_ref[...] = (acc / denom[:, None]).astype(o_ref.dtype)
    else:
        o_ref, m_ref, l_ref = out_refs
        o_ref[...] = acc
        m_ref[...] = m
        l_ref[...] = l


def split_outputs(b: int, kvh: int, splits: int, gp: int, d: int, dtype) -> tuple[list, list]:
    """Output shapes and block specs of a (row, kv head, split) grid: the normalised [B, KVH, GP, D]
    result with one split, else per split the float32 accumulator, running max and sum for split_merge."""
    if splits == 1:
        return ([jax.ShapeDtypeStruct((b, kvh, gp, d), dtype)],
                [pl.BlockSpec((None, None, gp, d), lambda i, j, s: (i, j, 0, 0))])
    out_shape = [
        jax.ShapeDtypeStruct((b, kvh, splits, gp, d), jnp.float32),
        jax.ShapeDtypeStruct((b, kvh, splits, gp), jnp.float32),
        jax.ShapeDtypeStruct((b, kvh, splits, gp), jnp.float32),
    ]
    out_specs = [
        pl.BlockSpec((None, None, None, gp, d), lambda i, j, s: (i, j, s, 0, 0)),
        pl.BlockSpec((None, None, None, gp), lambda i, j, s: (i, j, s, 0)),
        pl.BlockSpec((None, None, None, gp), lambda i, j, s: (i, j, s, 0)),
    ]
    return out_shape, out_specs


@functools.partial(
    jax.jit,
    static_argnames=("scale", "block_tokens", "num_splits", "num_warps", "num_stages", "interpret"),
)
def paged_decode_attention(
    q: jax.Array,
    k_pages: jax.Array,
    v_pages: jax.Array,
    block_tables: jax.Array,
    kv_start: jax.Array,
    kv_end: jax.Array,
    k_scale: jax.Array | None = None,
    v_scale: jax.Array | None = None,
    *,
    scale: float,
    block_tokens: int | None = None,
    num_splits: int | None = None,
    num_warps: int = 4,
    num_stages: int = 2,
    interpret: bool = False,
) -> jax.Array:
    """q [B, H, D] attends to keys kv_start[b] <= j < kv_end[b] of its row's pages -> [B, H, D].

    k_pages, v_pages: [num_pages, page_size, KVH, D]; block_tables int32 [B, P]; the caller makes sure
    kv_end[b] <= P * page_size. Rows with an empty interval return zeros. fp8 pages need k_scale and
    v_scale, float32 [num_pages, page_size, KVH] (value = page * scale); the math then runs in q's dtype.
    """
    scaled = jnp.dtype(k_pages.dtype) in SCALED_DTYPES
    if scaled != (k_scale is not None and v_scale is not None):
        raise ValueError(f"{k_pages.dtype} pages {'need' if scaled else 'take no'} k_scale and v_scale")
    compute = q.dtype if scaled else k_pages.dtype
    b, h, d = q.shape
    n, ps, kvh, _ = k_pages.shape
    p = block_tables.shape[1]
    g = h // kvh
    gp = max(MIN_DOT_ROWS, pl.next_power_of_2(g))
    # fp8 tiles become q-dtype tiles in registers: size them like pages of that dtype.
    bk = block_tokens or default_block_tokens(d, compute)
    splits = num_splits or default_num_splits(b, kvh, p * ps, bk)

    qg = q.astype(compute).reshape(b, kvh, g, d)
    qg = jnp.pad(qg, ((0, 0), (0, 0), (0, gp - g), (0, 0)))
    k_rows = k_pages.reshape(n * ps * kvh, d)  # row (slot * KVH + head): a free reshape
    v_rows = v_pages.reshape(n * ps * kvh, d)
    tables = block_tables.astype(jnp.int32).reshape(b * p)
    lo = kv_start.astype(jnp.int32)
    hi = kv_end.astype(jnp.int32)

    whole = lambda shape: pl.BlockSpec(shape, lambda *_: (0,) * len(shape))  # noqa: E731
    in_specs = [
        whole((b,)), whole((b,)), whole((b * p,)),
        pl.BlockSpec((None, None, gp, d), lambda i, j, s: (i, j, 0, 0)),
        whole(k_rows.shape), whole(v_rows.shape),
    ]
    scale_rows = ()
    if scaled:  # row (slot * KVH + head), like the pages
        scale_rows = (k_scale.astype(jnp.float32).reshape(-1), v_scale.astype(jnp.float32).reshape(-1))
        in_specs += [whole(scale_rows[0].shape), whole(scale_rows[1].shape)]
    out_shape, out_specs = split_outputs(b, kvh, splits, gp, d, q.dtype)
    normalize = splits == 1
    kernel = functools.partial(
        _decode_kernel, kv_heads=kvh, page_size=ps, pages_per_row=p, block_tokens=bk,
        num_splits=splits, scale_log2=scale * _LOG2E, normalize=normalize, scaled=scaled,
    )
    outs = pl.pallas_call(
        kernel,
        grid=(b, kvh, splits),
        in_specs=in_specs,
        out_specs=out_specs,
        out_shape=out_shape,
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=interpret,
        name=f"paged_decode_attention_g{gp}_d{d}_bk{bk}_s{splits}{'_fp8' if scaled else ''}",
    )(lo, hi, tables, qg, k_rows, v_rows, *scale_rows)

    if normalize:
        out = outs[0][:, :, :g]
    else:
        out = split_merge.merge_for_attention(*outs, group=g, out_dtype=q.dtype, interpret=interpret)
    return out.reshape(b, h, d)
