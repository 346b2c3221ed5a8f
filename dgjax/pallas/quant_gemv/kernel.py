"""x [rows <= 16, K] . W for a dense quantized weight as one Pallas kernel (Triton lowering): the packed
weight is read once and decoded tile by tile in registers, never dequantized whole.

Why this shape:
- Decode projections are GEMVs: the work is streaming the packed weight at the HBM read ceiling; the
  reference (`dgjax.quant.reference_matmul`) first writes and re-reads a dequantized copy.
- Grid (column block, K split). A program walks its K range in steps of `block_k` inputs, loads the
  [block_n, block_k] weight tile of its columns, decodes it and does one tensor-core dot (two for the
  nibble formats) with the x rows, padded to 16 by masked loads (Triton's `dot` needs every dim >= 16).
- The tile decoders are the MoE decode kernel's (moe_decode/tiles.py): a dense node is handed to them as
  a one-expert stack (free reshapes, expert index 0), so every format (FP8 blocks, NVFP4, MXFP4, int4/int8
  groups with or without zero points) is decoded by exactly the same code in both kernels.
- Split-K: attention and down projections have few column blocks (4096 / 64 = 64 programs on 132 SMs),
  so K is split until about two programs per SM run; splits write float32 partials [splits, rows, N]
  and a small jnp sum finishes them, or (`keep_splits`) the consumer kernel does (`SplitSums`: the fused
  decode attention sums qkv's partials as it loads its rows). One split writes x's dtype directly.
- An optional RMSNorm before the projection runs in the prologue: every program re-reads the few x rows
  over all of K for their scale (`tiles.rms_scales`), the norm vector's row is a kernel argument.
- Stores write only the real rows (masked stores), so one row writes 1/16 of a padded tile.
- Default K step: 128 bytes of each weight row (128 fp8/int8 inputs, 256 nibble inputs), one cache line.
Numerics: float32 accumulation; decoded tiles are rounded to x's dtype before the dot, like the reference
(FP8 applies its block scale to the dot's column sums instead, which is exact up to float32 rounding).
Why the Triton lowering: the same masked row loads/stores and per-tile decoders the MoE kernel already
runs on the H200; at <= 16 rows there is no warpgroup MMA or TMA pipeline for Mosaic GPU to win.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas import bf12_tiles
from dgjax.pallas.launch import PROGRAMS_PER_SM, Launch, choose_impl, split_steps, target_programs, whole
from dgjax.pallas.moe_decode import tiles
from dgjax.pallas.moe_decode.tiles import Operand, valid_block_k, valid_block_n
from dgjax.pallas.split_sums import SplitSums
from dgjax.quant import is_quantized

MAX_ROWS = tiles.MIN_DOT  # one padded row tile
BLOCK_N_DEFAULTS = (64, 128, 32, 16)
ROW_BYTES_PER_STEP = 128
MAX_SPLITS = 16


def _lift(a):
    """An array (or a shape struct, for lowering checks) with a leading expert axis of 1."""
    if isinstance(a, jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct((1,) + tuple(a.shape), a.dtype)
    return a.reshape((1,) + tuple(a.shape))


def as_expert_stack(w: Any) -> Any:
    """A dense node [*in, *out] as the one-expert stack [1, K, N] that tiles.py reads (free reshapes)."""
    arrays = {f.name: getattr(w, f.name) for f in dataclasses.fields(w) if f.metadata.get("pytree_node", True)}
    lifted = {name: None if a is None else _lift(a) for name, a in arrays.items()}
    return dataclasses.replace(w, shape=(1, w.k, w.n), in_dims=1, expert_dims=1, **lifted)


def describe(w: Any) -> Operand | None:
    """The kernel's static view of a dense quantized weight, or None for one it cannot read."""
    if not is_quantized(w) or w.expert_dims:
        return None
    return tiles.describe(as_expert_stack(w))


def _row_bytes_step(op: Operand) -> int:
    return 2 * ROW_BYTES_PER_STEP if op.packed else ROW_BYTES_PER_STEP


def _block_k(op: Operand) -> int | None:
    """The widest valid K step up to 128 bytes of a weight row."""
    bk = _row_bytes_step(op)
    while bk >= tiles.MIN_DOT:
        if valid_block_k(op, bk):
            return bk
        bk //= 2
    return None


def supports(rows: int, w: Any, x_dtype: Any = jnp.bfloat16) -> bool:
    """Whether the kernel handles this row count, activation dtype and weight (else use the reference)."""
    op = describe(w)
    if op is None or not 1 <= rows <= MAX_ROWS or jnp.dtype(x_dtype) not in tiles.PLAIN_DTYPES:
        return False
    if op.fmt == "bf12" and jnp.dtype(x_dtype) not in bf12_tiles.X_DTYPES:
        return False
    return any(valid_block_n(op, b) for b in BLOCK_N_DEFAULTS) and _block_k(op) is not None


WIDE_ENV_VAR = "DGJAX_QUANT_GEMV_WIDE"
WIDE_BLOCK_N = 128


def wide_fp8() -> bool:
    """Whether fp8 weights take 128-column blocks where their K splits still fill the GPU ($DGJAX_QUANT_GEMV_WIDE,
    on | off, default on). Why: an fp8 K step stays inside one 128-wide scale block, so a 64-column tile moves
    8 KB a step, half a bf16 tile's; 128 columns (16 KB a step, same programs through more splits) were
    faster at every fp8 projection shape swept on the H200 (benchmarks/results/2026-12-01-s9d-*): glm-4.5-air
    q/k/v 20.8 vs 23.4 µs, o 17.8 vs 18.9, qwen3-30b-a3b o 6.7 vs 7.0, q/k/v 7.8 vs 7.9."""
    return choose_impl(None, WIDE_ENV_VAR, ("on", "off"), "quant gemv wide fp8 blocks", default="on") == "on"


def _splits_to_fill(op: Operand, bn: int, bk: int, programs: int, even: bool = False) -> int:
    """Doubling K splits while fewer than `programs` programs run. Where K's steps do not halve evenly (glm-4.5-air's
    shared down: 1408 = 11 x 128 inputs, which left 64 programs on 132 SMs) the last split runs fewer steps,
    unless `even` (the late norm sums every split's squares at its own step offsets)."""
    splits, total = 1, op.k // bk
    while (op.n // bn) * splits < programs and splits < MAX_SPLITS:
        if op.k % (2 * splits * bk) != 0 and (even or split_steps(total, 2 * splits) is None):
            break
        splits *= 2
    return splits


def default_launch(op: Operand, programs: int | None = None, even: bool = False) -> Launch:
    """64-column blocks (fp8: 128 where that still fills the GPU, `wide_fp8`), 128-byte K steps, and K splits
    until about `programs` programs are busy (`even`: only splits that cut K's steps evenly)."""
    programs = programs or target_programs()
    bk = _block_k(op)
    if op.fmt == "bf12":
        return _bf12_launch(op, bk, programs, even)
    if op.fmt == "fp8" and valid_block_n(op, WIDE_BLOCK_N) and wide_fp8():
        splits = _splits_to_fill(op, WIDE_BLOCK_N, bk, programs, even)
        if (op.n // WIDE_BLOCK_N) * splits >= programs or splits == MAX_SPLITS:
            return Launch(WIDE_BLOCK_N, bk, splits)
    bn = next(b for b in BLOCK_N_DEFAULTS if valid_block_n(op, b))
    return Launch(bn, bk, _splits_to_fill(op, bn, bk, programs, even))


BF12_STAGES = 2  # a 48 KB K step: 2 stages were as fast or faster in every swept shape (s25e), 8 warps never


def _bf12_launch(op: Operand, bk: int, programs: int, even: bool) -> Launch:
    """bf12: 128-column blocks where they alone give every SM a program (llama's gate/up: 55 vs 69 µs at 64
    columns), else the defaults; K splits up to just under two programs an SM (down 32.9 µs at 256 programs vs 36.3
    at 512; o 16.0 vs 18.4; benchmarks/results/2026-12-04-s25b-*)."""
    wide = valid_block_n(op, WIDE_BLOCK_N) and op.n // WIDE_BLOCK_N >= programs // PROGRAMS_PER_SM
    if wide:
        return Launch(WIDE_BLOCK_N, bk, num_stages=BF12_STAGES)
    bn = next(b for b in BLOCK_N_DEFAULTS if valid_block_n(op, b))
    return Launch(bn, bk, _splits_to_fill(op, bn, bk, programs - programs // 16, even), num_stages=BF12_STAGES)


def check_launch(op: Operand, launch: Launch, even: bool = False) -> None:
    """Blocks on the weight's grid; every split runs at least one K step (`even`: the same number)."""
    steps = op.k // launch.block_k if op.k % launch.block_k == 0 else 0
    fits = steps and (steps % launch.splits == 0 if even else split_steps(steps, launch.splits) is not None)
    if not (valid_block_n(op, launch.block_n) and valid_block_k(op, launch.block_k) and fits):
        raise ValueError(f"{launch} does not tile a [{op.k}, {op.n}] {op.fmt} weight (scale block {op.scale_block})"
                         + (" in even K splits (late norm)" if even else ""))


def _gemv_kernel(x_ref, *refs, op: Operand, rows: int, launch: Launch, k_steps: int, normed: bool, eps: float,
                 late_norm: bool, after: int = 0):
    refs = refs[:-1 - after] + refs[-1:]  # `after` operands: never read (ordering only)
    w_refs, o_ref = refs[:-3] if normed else refs[:-1], refs[-1]
    j, s = pl.program_id(0), pl.program_id(1)
    bk, bn = launch.block_k, launch.block_n
    n0 = j * bn
    total = op.k // bk
    steps = None if total == k_steps * launch.splits else jnp.minimum(jnp.int32(k_steps), total - s * k_steps)
    loop = functools.partial(tiles.k_loop, k_steps=k_steps, base=s * (k_steps * bk), block_k=bk,
                             unroll=launch.unroll, steps=steps)
    norm = None
    if normed:  # the RMSNorm before the projection (row: a runtime value, one kernel per shape)
        norm_ref, row_ref = refs[-3], refs[-2]
        row = jnp.zeros((1, 1), jnp.int32) + row_ref[0]
        # prologue: the rows' scales over all of K first; late: the dot runs on x * g and the scale, summed
        # from every split's x range alongside the weight stream, multiplies the accumulator at the end
        norm = (norm_ref, row, None if late_norm else tiles.rms_scales(x_ref, rows, op.k, bk, eps))
    span = k_steps * bk  # one split's K range
    ahead = tiles.ScalePrefetch(op, bn)  # DGJAX_FP8_SCALE=prefetch: each step's scale loaded in the step before

    def step(k0, carry):  # carry: (acc, this step's scale: None unless `ahead.on`)
        acc, scale = carry
        nxt = ahead.next(w_refs, 0, k0, n0, bk)
        return acc + tiles.tile_dot(tiles.x_tiles(x_ref, rows, k0, bk, op, norm), w_refs, op, 0, k0, n0, bk, bn,
                                    scale=scale), nxt

    def late_step(k0, carry):  # also sums every split's x squares at this step's offset in its range
        acc, sq = carry
        for other in range(launch.splits):
            sq = sq + tiles.row_squares(x_ref, rows, k0 + (other - s) * span, bk)
        return step(k0, acc), sq

    carry = (tiles.acc_zeros(op, x_ref.dtype, bn), ahead.first(w_refs, 0, s * span, n0))
    if normed and late_norm:
        (acc, _), sq = loop(late_step, (carry, jnp.zeros((MAX_ROWS, 1), jnp.float32)))
        acc = tiles.acc_rows(op, x_ref.dtype, acc) * lax.rsqrt(sq / op.k + eps)
    else:
        acc = tiles.acc_rows(op, x_ref.dtype, loop(step, carry)[0])
    if op.fmt == "bf12":  # row scales; the escapes once per column block (its first K split)
        acc = bf12_tiles.finish(acc, w_refs, x_ref, op.n, op.slots, 0, n0, bn, rows, s == 0)
    tiles.store_rows(o_ref, acc.astype(o_ref.dtype), rows)


@functools.partial(jax.jit, static_argnames=("out_dtype", "launch", "eps", "keep_splits", "late_norm", "interpret"))
def quant_gemv(x: jax.Array, w: Any, norm: jax.Array | None = None, norm_row: jax.Array | int = 0, *,
               out_dtype: Any = None, launch: Launch | None = None, eps: float = 1e-6, keep_splits: bool = False,
               late_norm: bool = False, after: tuple = (), interpret: bool = False) -> Any:
    """x [rows, K] . w (dense [*in, *out], K = prod(in), N = prod(out)) -> [rows, N] in `out_dtype` (x's).

    With `norm` ([K], or [R, K] stacked over layers, row `norm_row`): rms_norm(x, norm) . w, the norm applied
    in the kernel's prologue instead of a launch of its own (`ref.quant_gemv`'s contract). `late_norm`: no
    prologue; the dot runs on x * norm (rounded to x's dtype) and the rows' RMS scale, accumulated alongside
    the weight stream, multiplies the result (the same value up to where x's dtype rounds).
    `keep_splits`: a split-K launch returns its float32 partials unsummed, as a `SplitSums` [splits, rows, N]
    whose `value()` is the ordinary result (for consumer kernels that sum while loading).
    `after`: arrays passed as operands the kernel never reads, so that in a CUDA graph built from buffer
    dependencies it runs only once their producers have (dgjax/pallas/l2_prefetch: the weight already in L2)."""
    rows = x.shape[0]
    if not supports(rows, w, x.dtype) or x.shape[1] != w.k:
        raise ValueError(f"the quantized GEMV kernel cannot multiply x {x.shape} {x.dtype} by a "
                         f"{type(w).__name__} of shape {w.shape}")
    op, arrays = tiles.operand(as_expert_stack(w))
    if norm is not None and op.fmt == "bf12":
        raise ValueError("the bf12 GEMV does not fuse a norm (its escapes read x as it is)")
    launch = launch or default_launch(op, even=late_norm)
    check_launch(op, launch, even=late_norm)
    bn, bk, splits = launch.block_n, launch.block_k, launch.splits
    out_dtype = jnp.dtype(out_dtype or x.dtype)
    if splits == 1:
        out_shape = jax.ShapeDtypeStruct((rows, op.n), out_dtype)
        out_spec = pl.BlockSpec((rows, bn), lambda j, s: (0, j))
    else:
        out_shape = jax.ShapeDtypeStruct((splits, rows, op.n), jnp.float32)
        out_spec = pl.BlockSpec((None, rows, bn), lambda j, s: (s, 0, j))
    normed = norm is not None
    if normed:
        arrays = list(arrays) + [norm.reshape(-1, op.k), jnp.asarray(norm_row, jnp.int32).reshape(1)]
    arrays = list(arrays) + list(after)
    kernel = functools.partial(_gemv_kernel, op=op, rows=rows, launch=launch, k_steps=split_steps(op.k // bk, splits),
                               normed=normed, eps=eps, late_norm=late_norm, after=len(after))
    out = pl.pallas_call(
        kernel,
        grid=(op.n // bn, splits),
        in_specs=[whole(x.shape)] + [whole(a.shape) for a in arrays],
        out_specs=out_spec,
        out_shape=out_shape,
        compiler_params=plgpu.CompilerParams(num_warps=launch.num_warps, num_stages=launch.num_stages),
        interpret=interpret,
        name=f"quant_gemv_{op.fmt}{('_latenorm' if late_norm else '_rmsnorm') if normed else ''}_r{rows}_{launch.tag()}",
    )(x, *arrays)
    if splits == 1:
        return out
    return SplitSums(out, out_dtype) if keep_splits else out.sum(0).astype(out_dtype)
