"""One decode token's attention as one Pallas kernel: from the fused qkv projection's output to the
attention output, with this token's K/V written into its page slot on the way.

Why: the unfused path runs, per layer and step, a slice of q out of the qkv output, q's rope, a pad of the
GQA group to 16 rows, a scatter of K (with its rope) and one of V, then the attention kernel: six launches
of 1.5-3.3 us each around ~6 us of attention at 1K context (H200 trace,
benchmarks/results/2026-12-01-decode-summary.md). Here every program reads its q rows, the new k and v
rows straight from qkv [B*KVH*(G+2), D], applies the optional q/k RMSNorm and the rotary embedding in
registers, and the split-0 program of each (row, KV head) stores the new K/V row into the pages (the page
arrays are aliased in and out, nothing else of them is written).

How the new token is attended without a race: programs read keys [kv_start, kv_end - 1) from the pages,
never the slot being written this step; the new key (always the row's last visible one at decode) enters
split 0's online softmax from registers as its initial state. Splits merge as in the plain kernel.

Rotate-half needs the two halves of a head swapped, which a register tile cannot do: q and k are loaded as
column segments [0, R/2), [R/2, R) and, for partial rotary, [R, D); scores add one dot per segment.
Segments must be >= 16 wide (Triton's dot), so head_dim 64 with full rope is the smallest case.
Only bf16/f16/f32 pages: fp8 pages keep the unfused path (the new row would need quantizing here).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas import pdl
from dgjax.pallas.carrier import f16_carrier
from dgjax.pallas.launch import sm_count
from dgjax.pallas.online_softmax import online_softmax_step, page_rows
from dgjax.pallas.paged_attention.kernel import (
    MAX_GROUP, MIN_DOT_ROWS, SUPPORTED_DTYPES, default_block_tokens, default_num_splits, split_outputs,
)
from dgjax.pallas.split_merge import api as split_merge
from dgjax.pallas.split_sums import SplitSums

_LOG2E = math.log2(math.e)


def segments(head_dim: int, rotary_dim: int) -> tuple[tuple[int, int], ...]:
    """(start, width) column segments: the two rope halves, then the pass-through part if any."""
    half = rotary_dim // 2
    segs = ((0, half), (half, half))
    return segs + (((rotary_dim, head_dim - rotary_dim),) if rotary_dim < head_dim else ())


LONG_SPLIT_TOKENS = 384  # keys a split would get, at or above which a table counts as long
WIDE_BLOCK_SPLIT_TOKENS = 192  # keys a split gets, at or above which a loop step of a long table takes 128 keys
DOUBLING_MAX_BATCH = 2  # long tables double their splits only in buckets this narrow (one stream + padding)
WIDE_BATCH_PROGRAMS_PER_SM = 1  # the grid target of wider buckets (4+ rows) with short tables, see default_launch
WIDE_BATCH_MAX_TOKENS = 4096  # the longest table (keys a row) that target applies to


def default_launch(batch: int, kv_heads: int, max_tokens: int, head_dim: int, page_dtype,
                   programs: int | None = None) -> tuple[int, int]:
    """(keys per loop step, splits) for a table of `max_tokens` keys a row.

    The paged kernel's rule (about `programs` programs, 16 KB K tiles); a long table then takes 128-key
    steps, and in the one-stream bucket (2 rows, one of them padding whose programs exit at once, so half
    the grid works) twice the splits. On the H200, llama-3.1-8b heads, 8K keys:
    - 2 rows (s11a, padding row counted): 17 splits of 64-key steps 24.2 µs a layer, 33 splits 19.0,
      33 splits of 128-key steps 17.1, 66 splits 19.7-20.0; the s12a sweep around 34 x 128 found nothing
      faster (50 splits 17.5, 3 stages 17.0, 8 warps 17.7-23.9).
    - 4 rows (s12a, s12f twice): 9 splits of 128-key steps 38.2-38.5 µs, 18 of 128 (doubled) 42.3-42.5,
      9 of 64 42.5-42.9.
    - 16 rows (s12a): 3 of 128 128.4, 6 of 128 129.8, 3 of 64 130.0, 6 of 64 157.3.
    At 1K keys 17 splits of 64 stayed best (7.9 µs; 33 splits 9.1, 128 keys 8.8), so tables of ~2K keys keep
    the paged rule in the one-stream bucket; an 8K table serving 1K contexts pays ~1.5 µs a layer.
    Buckets of 4+ rows with tables up to WIDE_BATCH_MAX_TOKENS keys aim at one program an SM, not two: at a
    2064-key table (s26b/s26d, llama-3.1-8b heads) 4 rows take 5 splits of 128 keys instead of 9 of 64 (device
    busy 4.38-4.47 vs 4.41-4.50 ms a tick over three runs each) and 16 rows 2 instead of 3 (busy 4.90 vs 5.01 ms,
    3261.5 vs 3157.4 tok/s); qwen3-30b-a3b fp8 C4 9 instead of 17 (3.95 vs 3.97). At an 8K table it lost (s26e:
    4 rows, 5 splits of ~1650 keys, attention + merge 1524 vs 1220 µs a tick, busy 5.61 vs 5.34 ms), so longer
    tables keep two programs an SM; the 4096 limit between the two measured tables is not itself measured.
    In the one-stream bucket a split of 192-384 table keys (not long) takes 128-key steps too (s28e, kernel alone):
    qwen3-30b-a3b heads at an 8416-key table 33 splits 14.0 vs 16.3 µs, glm-4.5-air heads at 4160 keys 17 splits
    13.6 vs 15.9; s11a's 33 splits at 8K (528 programs) 17.1 vs 19.0. End to end (s28f/g): qwen3-30b-a3b fp8 C1 at
    8K 317.2 vs 308.6 tok/s, llama-3.1-8b C1 at 4K 223.7 vs 220.9. Wider buckets keep 64 there (unmeasured).
    """
    if programs is None and batch > DOUBLING_MAX_BATCH and max_tokens <= WIDE_BATCH_MAX_TOKENS:
        programs = WIDE_BATCH_PROGRAMS_PER_SM * sm_count()
    bk = default_block_tokens(head_dim, page_dtype)
    splits = default_num_splits(batch, kv_heads, max_tokens, bk, programs)
    one_stream = batch <= DOUBLING_MAX_BATCH
    long = max_tokens >= LONG_SPLIT_TOKENS * splits
    if long and one_stream:
        splits = min(2 * splits, pl.cdiv(max_tokens, bk))
    if (long or one_stream) and max_tokens >= WIDE_BLOCK_SPLIT_TOKENS * splits:
        bk = max(bk, 128)
    return bk, splits


def supports(num_heads: int, kv_heads: int, head_dim: int, rotary_dim: int, page_dtype) -> bool:
    pow2 = lambda n: n > 0 and n & (n - 1) == 0  # noqa: E731
    return (
        num_heads % kv_heads == 0
        and num_heads // kv_heads <= MAX_GROUP
        and jnp.dtype(page_dtype) in SUPPORTED_DTYPES
        and rotary_dim % 2 == 0
        and all(w >= 16 and pow2(w) for _, w in segments(head_dim, rotary_dim))
        and pow2(head_dim)
    )


def _kernel(*refs, n_in: int, prefetch: tuple[int, int, int, int] | None, **kw):
    """The grid's first `num_splits` splits attend. With `prefetch` (extra splits, chunk rows, rows per
    program, rows in all), the extra splits after them read the last input (an [R, C] view of the weight the
    next kernel reads) and store a checksum of it to the last output, which nothing reads: the loads exist to
    leave the weight in L2 while the attention's own programs wait on their serial chain of small loads."""
    ids = pl.program_id(0), pl.program_id(1), pl.program_id(2)  # (read here: not inside a branch)
    if prefetch is None:
        return _attention(ids, *refs, **kw)
    pf_ref, sink_ref = refs[n_in - 1], refs[-1]
    rest = refs[:n_in - 1] + refs[n_in:-1]
    pl.when(ids[2] < kw["num_splits"])(lambda: _attention(ids, *rest, **kw))
    pl.when(ids[2] >= kw["num_splits"])(
        lambda: _prefetch(ids, pf_ref, sink_ref, kw["kv_heads"], kw["num_splits"], *prefetch))


def _prefetch(ids, pf_ref, sink_ref, kv_heads: int, num_splits: int, pf_splits: int, chunk_rows: int, per: int,
              rows: int):
    """Program q of the extra splits loads rows [q * per, (q + 1) * per) of the first `rows` rows of pf [R, C]
    in chunks of `chunk_rows` rows, every load issued before any is summed (a loop would wait out each load's
    latency)."""
    width = pf_ref.shape[1]
    q = (ids[0] * kv_heads + ids[1]) * pf_splits + ids[2] - num_splits
    r = lax.broadcasted_iota(jnp.int32, (chunk_rows, width), 0)
    c = lax.broadcasted_iota(jnp.int32, (chunk_rows, width), 1)
    tiles = []
    for i in range(per // chunk_rows):
        row = q * per + i * chunk_rows + r
        tiles.append(plgpu.load(pf_ref.at[jnp.minimum(row, rows - 1), c]))  # past the end: the last row again
    total = sum(jnp.sum(t.astype(jnp.float32)) for t in tiles)
    plgpu.store(sink_ref.at[jnp.zeros((1,), jnp.int32) + q], jnp.zeros((1,), jnp.float32) + total)


def _attention(
    ids, lo_ref, hi_ref, tables_ref, slots_ref, cos_ref, sin_ref, qkv_ref, k_ref, v_ref, offset_ref, *refs,
    kv_heads: int, group: int, group_pad: int, page_size: int, pages_per_row: int, block_tokens: int,
    num_splits: int, scale_log2: float, normalize: bool, qk_norm: bool, eps: float, segs, head_dim: int,
    dtype, parts: int, has_bias: bool, skip_idle: bool, early_keys: bool = False,
):
    qn_ref, kn_ref, row_ref = refs[:3] if qk_norm else (None, None, None)
    refs = refs[3:] if qk_norm else refs
    bias_ref, out_refs = (refs[0], refs[1:]) if has_bias else (None, refs)
    k_out_ref, v_out_ref = out_refs[-2:]
    b, h, s = ids
    base = (b * kv_heads + h) * (group + 2)  # qkv row of this (row, KV head)'s first q head
    part_rows = qkv_ref.shape[0] // max(parts, 1)
    r = lax.broadcasted_iota(jnp.int32, (group_pad, 1), 0)
    q_rows = base + jnp.minimum(r, group - 1)
    q_real = r < group  # pad rows load nothing (masked) and attend as zeros; the merge never reads them
    one = jnp.zeros((1, 1), jnp.int32)

    def cols(start: int, width: int):
        return start + lax.broadcasted_iota(jnp.int32, (1, width), 1)

    def load_qkv(rows, columns, mask=None):
        """qkv[rows, columns] in the model dtype; from SplitSums partials: their float32 sum, rounded, plus
        the bias (of the row's place in [KVH, G+2]) rounded again, as `SplitSums.value` computes it.
        `mask` [n, 1]: rows to load; the others read as zeros (bias included)."""
        if mask is not None:
            mask = jnp.broadcast_to(mask, (rows.shape[0], columns.shape[1]))
        load = lambda ref, rr: (plgpu.load(ref.at[rr, columns]) if mask is None  # noqa: E731
                                else plgpu.load(ref.at[rr, columns], mask=mask, other=0))
        if not parts:
            return load(qkv_ref, rows)
        total = load(qkv_ref, rows)
        for p in range(1, parts):
            total = total + load(qkv_ref, rows + p * part_rows)
        if bias_ref is None:
            return total.astype(dtype)
        bias = load(bias_ref, rows % (kv_heads * (group + 2))).astype(jnp.float32)
        return (total.astype(dtype).astype(jnp.float32) + bias).astype(dtype)

    def load_rows(rows, mask=None):
        """The column segments of qkv rows `rows` [n, 1], as float32 [n, w] tiles."""
        return [load_qkv(rows, cols(c, w), mask).astype(jnp.float32) for c, w in segs]

    def norm_rope(parts, norm_ref):
        if norm_ref is not None:  # RMSNorm over the whole head, rounded to the model dtype like the model
            ss = sum(jnp.sum(p * p, axis=1, keepdims=True) for p in parts)
            inv = lax.rsqrt(ss / head_dim + eps)
            row = one + row_ref[0]  # the norm stacks' row: a runtime value, so every layer shares one kernel
            weight = [plgpu.load(norm_ref.at[row, cols(c, w)]).astype(jnp.float32) for c, w in segs]
            parts = [(p * inv * g).astype(dtype).astype(jnp.float32) for p, g in zip(parts, weight)]
        (c0, w0), (c1, w1) = segs[0], segs[1]
        cos0 = plgpu.load(cos_ref.at[one + b, cols(c0, w0)])
        cos1 = plgpu.load(cos_ref.at[one + b, cols(c1, w1)])
        sin0 = plgpu.load(sin_ref.at[one + b, cols(c0, w0)])
        sin1 = plgpu.load(sin_ref.at[one + b, cols(c1, w1)])
        lo, hi = parts[0], parts[1]
        rot = [lo * cos0 - hi * sin0, hi * cos1 + lo * sin1] + parts[2:]
        return [x.astype(dtype) for x in rot]

    lo = lo_ref[b]
    hi = hi_ref[b]
    has_new = hi > lo  # a decoding row: its new token is its last visible key
    end_pages = jnp.where(has_new, hi - 1, lo)
    per_split = pl.cdiv(pl.cdiv(jnp.maximum(end_pages - lo, 0), num_splits), block_tokens) * block_tokens
    start = lo + s * per_split
    end = jnp.minimum(end_pages, start + per_split)
    num_blocks = pl.cdiv(jnp.maximum(end - start, 0), block_tokens)
    page_offset = offset_ref[0]  # this layer's first page in its pool (a runtime value, like the norm row)

    offsets = lax.broadcasted_iota(jnp.int32, (block_tokens,), 0)

    def load_block(i):
        """(valid [BK], K segments, V) of the split's i-th block of keys (masked past its end: no reads)."""
        tok = start + i * block_tokens + offsets
        valid = tok < end
        row = page_rows(tables_ref, b * pages_per_row, tok, valid, page_size, kv_heads, h, page_offset)[:, None]
        ks = [plgpu.load(k_ref.at[row, cols(c, w)], mask=jnp.broadcast_to(valid[:, None], (block_tokens, w)),
                         other=0) for c, w in segs]
        v = plgpu.load(v_ref.at[row, cols(0, head_dim)],
                       mask=jnp.broadcast_to(valid[:, None], (block_tokens, head_dim)), other=0)
        return valid, ks, v

    def attend():
        if early_keys:  # q's loads, then the first block's table and K/V loads, before any of them is used
            q_raw, k_raw = load_rows(q_rows, q_real), load_rows(one + base + group)
            v_new = load_qkv(one + base + group + 1, cols(0, head_dim))
            first = load_block(0)
            q, k_new = norm_rope(q_raw, qn_ref), norm_rope(k_raw, kn_ref)
        else:
            q = norm_rope(load_rows(q_rows, q_real), qn_ref)  # segments of [GP, w]; pad rows are zeros
            k_new = norm_rope(load_rows(one + base + group), kn_ref)  # segments of [1, w]
            v_new = load_qkv(one + base + group + 1, cols(0, head_dim))  # [1, D]
        slot_row = (plgpu.load(slots_ref.at[one + b]) + page_offset * page_size) * kv_heads + h  # [1, 1]

        @pl.when(s == 0)
        def _write():
            for part, (c, w) in zip(k_new, segs):
                plgpu.store(k_out_ref.at[slot_row, cols(c, w)], part.astype(k_out_ref.dtype))
            plgpu.store(v_out_ref.at[slot_row, cols(0, head_dim)], v_new.astype(v_out_ref.dtype))

        # split 0 starts from the new token's key; the others from an empty state
        new_score = sum(jnp.sum(qp.astype(jnp.float32) * kp.astype(jnp.float32), axis=1)
                        for qp, kp in zip(q, k_new)) * scale_log2  # [GP]
        take_new = has_new & (s == 0)
        m0 = jnp.where(take_new, new_score, -jnp.inf)
        l0 = jnp.where(take_new, jnp.ones_like(new_score), 0.0)
        acc0 = jnp.where(take_new, jnp.broadcast_to(v_new.astype(jnp.float32), (group_pad, head_dim)), 0.0)

        def step(block, carry):
            valid, ks, v = block
            scores = None
            for qp, kt in zip(q, ks):
                part = plgpu.dot(qp, kt.astype(dtype), trans_b=True)
                scores = part if scores is None else scores + part
            scores = jnp.where(valid[None, :], scores * scale_log2, -jnp.inf)
            # a split other than the first starts from an empty state
            return online_softmax_step(scores, v.astype(dtype), carry, dtype, rows_may_be_empty=True)

        if early_keys:  # an empty first block (no keys in this split) leaves the state as it is
            carry = step(first, (acc0, m0, l0))
            finish(*lax.fori_loop(1, num_blocks, lambda i, c: step(load_block(i), c), carry))
        else:
            finish(*lax.fori_loop(0, num_blocks, lambda i, c: step(load_block(i), c), (acc0, m0, l0)))

    def finish(acc, m, l):
        acc = pdl.trigger_after(acc)  # DGJAX_PDL_TRIGGER_AT=end: the kernel's dependents may launch from here
        if normalize:
            o_ref = out_refs[0]
            o_ref[...] = (acc / jnp.where(l == 0.0, 1.0, l)[:, None]).astype(o_ref.dtype)
        else:
            o_ref, m_ref, l_ref = out_refs[:3]
            o_ref[...] = acc
            m_ref[...] = m
            l_ref[...] = l

    if not skip_idle or normalize:
        attend()
        return
    # A split with no keys past the first (short contexts under a split count sized for the longest, and
    # padding rows) loads nothing: it stores the empty state the merge ignores. Costs the working programs a
    # wait on kv_start/kv_end before their q loads.
    busy = (s == 0) | (num_blocks > 0)
    pl.when(busy)(attend)

    @pl.when(jnp.logical_not(busy))
    def _idle():
        zeros = jnp.zeros((group_pad,), jnp.float32)
        finish(jnp.zeros((group_pad, head_dim), jnp.float32), zeros - jnp.inf, zeros)


PREFETCH_ROW_BYTES = 512  # a row of the prefetched weight's [R, C] view
PREFETCH_CHUNK_BYTES = 8192  # one load of a prefetch program: 64 bytes a thread at 4 warps
PREFETCH_PROGRAM_BYTES = 32768  # per prefetch program: 64 registers a thread of loaded bytes at 4 warps


def prefetch_plan(w, row_programs: int, program_bytes: int = PREFETCH_PROGRAM_BYTES, max_bytes: int | None = None):
    """(extra splits, chunk rows, rows per program, rows) to read `w`, or its first `max_bytes`, in about
    `program_bytes` a program over `row_programs` (row, KV head) pairs; None without `w` or where its size
    does not tile into rows."""
    nbytes = 0 if w is None else w.size * jnp.dtype(w.dtype).itemsize
    if not nbytes or nbytes % PREFETCH_ROW_BYTES:
        return None
    nbytes = min(nbytes, max_bytes or nbytes) // PREFETCH_ROW_BYTES * PREFETCH_ROW_BYTES
    rows = nbytes // PREFETCH_ROW_BYTES
    chunk = max(1, min(PREFETCH_CHUNK_BYTES, program_bytes) // PREFETCH_ROW_BYTES)
    splits = max(1, pl.cdiv(nbytes, program_bytes * row_programs))
    per = pl.cdiv(pl.cdiv(rows, splits * row_programs), chunk) * chunk
    return splits, chunk, per, rows


@functools.partial(
    jax.jit,
    static_argnames=("scale", "eps", "block_tokens", "num_splits", "split_programs", "num_warps", "num_stages",
                     "skip_idle", "prefetch_bytes", "prefetch_max_bytes", "with_sink", "carry_f16", "early_keys",
                     "interpret"),
)
def fused_decode_attention(
    qkv: jax.Array | SplitSums,
    cos: jax.Array,
    sin: jax.Array,
    k_pages: jax.Array,
    v_pages: jax.Array,
    block_tables: jax.Array,
    kv_start: jax.Array,
    kv_end: jax.Array,
    slots: jax.Array,
    q_norm: jax.Array | None = None,
    k_norm: jax.Array | None = None,
    *,
    scale: float,
    eps: float = 1e-6,
    block_tokens: int | None = None,
    num_splits: int | None = None,
    split_programs: int | None = None,
    num_warps: int = 4,
    num_stages: int = 2,
    norm_row: jax.Array | int = 0,
    page_offset: jax.Array | int = 0,
    skip_idle: bool = False,
    early_keys: bool = False,
    prefetch: jax.Array | None = None,
    prefetch_bytes: int = PREFETCH_PROGRAM_BYTES,
    prefetch_max_bytes: int | None = None,
    with_sink: bool = False,
    carry_f16: bool = False,
    interpret: bool = False,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """qkv [B, KVH, G+2, D] -> (out [B, KVH*G, D], k_pages, v_pages with this token's K/V at `slots` [B]).

    qkv may be a split-K projection's `SplitSums` (float32 partials [S, B, KVH, G+2, D], optional bias
    [KVH, G+2, D]): every program sums the rows it reads, rounds them to its dtype and adds the bias, which
    saves the summing launch before this kernel.

    Row b attends keys kv_start[b] <= j < kv_end[b]: j < kv_end - 1 from its pages (block_tables [B, P]),
    j = kv_end - 1 (this token) from registers. cos, sin: float32 [B, R] (R = rotary dim, scaling folded in).
    Rows with kv_end <= kv_start (padding) return zeros; every row's K/V is written to its slot.
    q_norm / k_norm: [D], or [R, D] stacks of which row `norm_row` is used (read in place). The row is a
    kernel argument, not a compile-time constant: as a constant it made each layer's kernel distinct, and the
    48 q/k-normed layers of qwen3-30b-a3b doubled its decode compile time on the H200 (8.2 -> 16.8 s, s7d).
    page_offset: added to every page id of `block_tables` and to `slots` (in pages): where the layer's pages
    start in a pool shared by several layers. A runtime argument too, so the per-layer offsets cost neither
    kernels nor index fusions to add them (XLA ran two per layer at 1 row; at 2 or more it shares them per tick).
    split_programs: the grid size the default split count aims at (`default_launch`'s `programs`).
    skip_idle: a split with no keys but the first (a context shorter than the split count was sized for,
    or a padding row) stores the empty state without loading q; False (default: faster on the H200, s10d)
    keeps every program's loads.
    prefetch: an array the next kernel reads (the o projection's weight), read by extra programs of this
    kernel (about `prefetch_bytes` each) so that it sits in L2 when that kernel starts (see `_kernel`).
    Only its first `prefetch_max_bytes` if given. Skipped where its size is not a multiple of
    PREFETCH_ROW_BYTES. `with_sink` (tests) also returns the prefetch programs' checksums, float32 [programs]:
    each the sum of the rows it read, as float32.
    carry_f16: out holds its bf16 values carried as float16 (dgjax/pallas/carrier.py), which the split
    merge writes at no cost, for an fp8 o GEMV that then skips its per-step rescaling of x.
    early_keys: each program issues its first block's block-table and K/V loads right after q's loads, before q's
    norm and rope use them, so that chain of reads overlaps q's instead of following it (the loop then starts at
    the second block); False keeps the loop's order. Same result either way.
    """
    parts = qkv.parts.shape[0] if isinstance(qkv, SplitSums) else 0
    dtype = jnp.dtype(qkv.dtype)
    b, kvh, g2, d = qkv.shape
    g = g2 - 2
    n, ps, _, _ = k_pages.shape
    p = block_tables.shape[1]
    gp = max(MIN_DOT_ROWS, pl.next_power_of_2(g))
    segs = segments(d, cos.shape[-1])
    if block_tokens:  # a caller's keys per step: the paged rule's splits for it
        bk, splits = block_tokens, default_num_splits(b, kvh, p * ps, block_tokens, split_programs)
    else:
        bk, splits = default_launch(b, kvh, p * ps, d, k_pages.dtype, split_programs)
    splits = num_splits or splits
    qk_norm = q_norm is not None

    rows = qkv.parts.reshape(parts * b * kvh * g2, d) if parts else qkv.reshape(b * kvh * g2, d)
    k_rows = k_pages.reshape(n * ps * kvh, d)
    v_rows = v_pages.reshape(n * ps * kvh, d)
    tables = block_tables.astype(jnp.int32).reshape(b * p)
    whole = lambda shape: pl.BlockSpec(shape, lambda *_: (0,) * len(shape))  # noqa: E731
    args = [kv_start.astype(jnp.int32), kv_end.astype(jnp.int32), tables, slots.astype(jnp.int32).reshape(b),
            cos.astype(jnp.float32), sin.astype(jnp.float32), rows, k_rows, v_rows,
            jnp.asarray(page_offset, jnp.int32).reshape(1)]
    if qk_norm:
        args += [q_norm.reshape(-1, d), k_norm.reshape(-1, d), jnp.asarray(norm_row, jnp.int32).reshape(1)]
    has_bias = bool(parts) and qkv.bias is not None
    if has_bias:
        args.append(qkv.bias.reshape(kvh * g2, d))
    pf = prefetch_plan(prefetch, b * kvh, prefetch_bytes, prefetch_max_bytes)
    if pf:
        args.append(prefetch.reshape(-1, PREFETCH_ROW_BYTES // jnp.dtype(prefetch.dtype).itemsize))
    in_specs = [whole(a.shape) for a in args]

    normalize = splits == 1
    out_shape, out_specs = split_outputs(b, kvh, splits, gp, d, dtype)
    out_shape += [jax.ShapeDtypeStruct(k_rows.shape, k_rows.dtype), jax.ShapeDtypeStruct(v_rows.shape, v_rows.dtype)]
    out_specs += [whole(k_rows.shape), whole(v_rows.shape)]
    n_main = len(out_shape) - 2
    if pf:
        sink = (b * kvh * pf[0],)
        out_shape.append(jax.ShapeDtypeStruct(sink, jnp.float32))
        out_specs.append(whole(sink))
    kernel = functools.partial(
        _kernel, n_in=len(args), prefetch=pf, kv_heads=kvh, group=g, group_pad=gp, page_size=ps, pages_per_row=p,
        block_tokens=bk, num_splits=splits, scale_log2=scale * _LOG2E, normalize=normalize, qk_norm=qk_norm, eps=eps,
        segs=segs, head_dim=d, dtype=dtype, parts=parts, has_bias=has_bias, skip_idle=skip_idle,
        early_keys=early_keys,
    )
    outs = pl.pallas_call(
        kernel,
        grid=(b, kvh, splits + (pf[0] if pf else 0)),
        in_specs=in_specs,
        out_specs=out_specs,
        out_shape=out_shape,
        input_output_aliases={7: n_main, 8: n_main + 1},
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=interpret,
        name=f"fused_decode_attention_g{gp}_d{d}_bk{bk}_s{splits}" + (f"_pf{pf[0]}" if pf else ""),
    )(*args)
    main, k_out, v_out = outs[:n_main], outs[n_main], outs[n_main + 1]
    if normalize:
        out = main[0][:, :, :g]
        out = f16_carrier(out) if carry_f16 else out
    else:
        out = split_merge.merge_for_attention(*main, group=g, out_dtype=dtype, carry_f16=carry_f16,
                                              interpret=interpret)
    out = out.reshape(b, kvh * g, d)
    result = out, k_out.reshape(k_pages.shape), v_out.reshape(v_pages.shape)
    return result + ((outs[-1] if pf else None),) if with_sink else result
