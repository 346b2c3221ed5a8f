"""How the MoE decode kernel reads one expert's weight tile in each format and multiplies it (inside a kernel).

Also the dense quantized GEMV's tile reader (dgjax/pallas/quant_gemv), which views a dense node as a
one-expert stack.

An expert-stacked weight stands for [E, K, N] (K contracted). Formats and the tile a K step reads:
- "plain": bf16/f16/f32 array in dgjax's input-major layout [E, K, N]: a [BK, BN] tile, one dot.
- "fp8" (`Fp8BlockWeight`): e4m3 [E, N, K] plus a float32 scale per (bn x bk) block: a [BN, BK] tile
  converted to x's dtype (exact); the dot is scaled per output column by its block's scale, so a K step
  stays inside one scale block. By default (DGJAX_FP8_DOT=f16) the tile converts to float16 instead (one
  paired conversion per two values, not two per value) and x's rows are scaled into f16 range (`f16_rows`);
  DGJAX_FP8_DOT=x keeps the dot in x's dtype; DGJAX_FP8_DOT=swap is f16 with the operands swapped (`swapped`);
  DGJAX_FP8_DOT=a8 quantizes x's rows to e4m3 per K step (`e4m3_rows`) and multiplies two fp8 tiles on the
  fp8 tensor cores (`fp8_mma`): no conversion of the weight tile at all, x rounded to 3 mantissa bits;
  DGJAX_FP8_DOT=a8x2 adds the e4m3-rounded residual of x as 16 more rows of the same fp8 dot
  (`e4m3_two_term_rows`): x kept to about bf16's precision, still no conversion.
- "nvfp4", "mxfp4", "int4" (packed nibbles [E, N, K/2], element 2i in the low nibble of byte i): a
  [BN, BK/2] byte tile; low and high nibbles are decoded separately and multiplied with the even and odd
  columns of x (two dots), so the nibbles never need re-interleaving. Their per-group scales (16 / 32 /
  group_size inputs) vary along K inside a tile: a compact [BN, BK/group] scale tile is loaded, broadcast
  over its groups and applied to the decoded weights before the dot (NVFP4's per-expert global scale
  multiplies the result).
- "int8" (`IntWeight` bits=8): int8 [E, N, K] with group scales: a [BN, BK] tile, scaled, one dot.
- "bf12" (`Bf12Weight`; the dense GEMV and both MoE kernels): a [BN, BK/2] tile of byte pairs and one of code
  pairs; even and odd inputs are rebuilt as bf16 (exponent field = code, sign and mantissa from the byte: the
  weight times 2**(15 - row top)) and meet x's even and odd columns times 2**X_SHIFT (two dots, exact
  scalings); the kernel's epilogue applies the row scales and adds the row's escapes (dgjax/pallas/bf12_tiles.py).
Quantized tiles are loaded unmasked (every dim is a multiple of the blocks; Triton cannot splat a fill
value into e4m3), decoded to float32, scaled, rounded to x's dtype for the tensor-core dot. The whole
weight is never dequantized.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas import bf12_tiles, carrier, fp8_mma, pdl
from dgjax.pallas.launch import choose_impl
from dgjax.quant import Bf12Weight, Fp8BlockWeight, IntWeight, Mxfp4Weight, Nvfp4Weight, is_quantized

MIN_DOT = 16  # Triton's dot needs every dimension >= 16
PLAIN_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16), jnp.dtype(jnp.float32))
PACKED = ("nvfp4", "mxfp4", "int4", "bf12")  # x meets them as even and odd columns


@dataclasses.dataclass(frozen=True)
class Operand:
    """Static description of one expert-stacked weight standing for [E, k, n]."""

    fmt: str  # plain | fp8 | nvfp4 | mxfp4 | int4 | int8 | bf12
    experts: int
    k: int
    n: int
    num_arrays: int = 1
    scale_block: tuple[int, int] = (0, 0)  # fp8: (rows of n, columns of k) one scale covers
    scale_grid: tuple[int, int] = (0, 0)  # fp8: (nb, kb)
    group: int = 0  # packed / int8: inputs per scale
    has_zero: bool = False  # int: asymmetric (zero points)
    slots: int = 0  # bf12: escape table width

    @property
    def packed(self) -> bool:
        return self.fmt in PACKED


def describe(w: Any) -> Operand | None:
    """The kernel's static view of a weight, or None for a layout it does not handle (shapes only)."""
    if is_quantized(w):
        if w.expert_dims != 1 or w.in_dims != 1 or len(w.shape) != 3:
            return None
        e, k, n = w.shape
        if isinstance(w, Fp8BlockWeight):
            return Operand("fp8", e, k, n, 2, tuple(w.block), tuple(w.scale.shape[1:]))
        if isinstance(w, Nvfp4Weight):
            return Operand("nvfp4", e, k, n, 3, group=16)
        if isinstance(w, Mxfp4Weight):
            return Operand("mxfp4", e, k, n, 2, group=32)
        if isinstance(w, Bf12Weight):
            return Operand("bf12", e, k, n, 5, slots=w.slots)
        if isinstance(w, IntWeight) and w.bits in (4, 8):
            zero = w.zero_point is not None
            return Operand("int4" if w.bits == 4 else "int8", e, k, n, 2 + zero, group=w.group_size, has_zero=zero)
        return None
    if not hasattr(w, "dtype") or len(getattr(w, "shape", ())) != 3 or jnp.dtype(w.dtype) not in PLAIN_DTYPES:
        return None
    e, k, n = w.shape
    return Operand("plain", e, k, n)


def operand(w: Any) -> tuple[Operand, tuple[jax.Array, ...]]:
    """The description and the arrays the kernel reads (scales flattened: kernels index them by row)."""
    op = describe(w)
    if op is None:
        raise ValueError(f"the MoE decode kernel cannot read a {type(w).__name__} weight of shape {w.shape}")
    if op.fmt == "plain":
        return op, (w,)
    if op.fmt == "fp8":
        return op, (w.weight, w.scale.astype(jnp.float32).reshape(-1))
    if op.fmt == "nvfp4":
        return op, (w.packed, w.block_scale.reshape(-1), w.global_scale.astype(jnp.float32).reshape(op.experts))
    if op.fmt == "mxfp4":
        return op, (w.packed, w.scale.reshape(-1))
    if op.fmt == "bf12":
        return op, (w.low, w.codes, w.row_scale.reshape(-1), w.escape_cols.reshape(-1), w.escape_bits.reshape(-1))
    zero = (w.zero_point.reshape(-1),) if op.has_zero else ()
    return op, (w.values, w.scale.reshape(-1)) + zero


def _pow2(b: int) -> bool:
    return b > 0 and b & (b - 1) == 0  # Triton tiles are powers of two


def valid_block_n(op: Operand, bn: int) -> bool:
    return _pow2(bn) and bn >= MIN_DOT and op.n % bn == 0


def valid_block_k(op: Operand, bk: int) -> bool:
    """A K step divides K, feeds dots of >= 16 columns, and sits on the format's scale grid."""
    if not (_pow2(bk) and op.k % bk == 0 and bk >= (2 * MIN_DOT if op.packed else MIN_DOT)):
        return False
    if op.fmt == "fp8":
        return op.scale_block[1] % bk == 0
    if op.group:
        return _pow2(op.group) and (bk % op.group == 0 or op.group % bk == 0)
    return True


# ---------------------------------------------------------------- inside the kernel


def trips(live, steps: int):
    """`steps` loop trips, 0 where `live` is false. Typed constants: the Triton lowering of a select between
    two weak-typed Python ints gives them the predicate's type (i1), which `scf.for` rejects."""
    return jnp.where(live, jnp.int32(steps), jnp.int32(0))


def k_loop(step, carry, k_steps: int, base, block_k: int, unroll: int, live=None, steps=None):
    """carry = step(k0, carry) for the `k_steps` K steps k0 = base, base + block_k, ...: `unroll` steps per
    loop iteration (their loads issue together), then the remainder one at a time. `live` False: no step.
    `steps` (a traced int32 <= k_steps): only that many steps, the program's share of an uneven K split."""
    if steps is not None:
        n_full = lax.div(steps, jnp.int32(unroll))

        def one(i, c):
            return step(base + (n_full * unroll + i) * block_k, c)

        def body_dyn(i, c):
            for u in range(unroll):
                c = step(base + (i * unroll + u) * block_k, c)
            return c

        carry = lax.fori_loop(jnp.int32(0), n_full, body_dyn, carry)
        return lax.fori_loop(jnp.int32(0), steps - n_full * unroll, one, carry) if unroll > 1 else carry
    full, rest = divmod(k_steps, unroll)
    count = (lambda n: n) if live is None else (lambda n: trips(live, n))

    def body(i, c):
        for u in range(unroll):
            c = step(base + (i * unroll + u) * block_k, c)
        return c

    carry = lax.fori_loop(0, count(full), body, carry)
    if rest:
        carry = lax.fori_loop(0, count(rest), lambda i, c: step(base + (full * unroll + i) * block_k, c), carry)
    return carry


def x_rows(x_ref, tokens: int, idx, first_row=0):
    """x[first_row:first_row + tokens, idx] for idx [1, cols] as a [16, cols] tile: the `tokens` real rows,
    padding rows 0 (masked loads; they read the last real row's address, masked off)."""
    r = lax.broadcasted_iota(jnp.int32, (MIN_DOT, 1), 0)
    ok = jnp.broadcast_to(r < tokens, (MIN_DOT, idx.shape[1]))
    return plgpu.load(x_ref.at[first_row + jnp.minimum(r, tokens - 1), idx], mask=ok, other=0)


def row_squares(x_ref, tokens: int, k0, bk: int):
    """sum(x * x) of each x row over inputs k0:k0+bk, float32 [16, 1] (padding rows: 0)."""
    xf = x_rows(x_ref, tokens, k0 + lax.broadcasted_iota(jnp.int32, (1, bk), 1)).astype(jnp.float32)
    return jnp.sum(xf * xf, axis=1, keepdims=True)


def rms_scales(x_ref, tokens: int, k: int, bk: int, eps: float):
    """rsqrt(mean(x * x) + eps) of each x row over all `k` inputs, float32 [16, 1] (padding rows: rsqrt(eps)),
    for `x_tiles`' fused RMSNorm. x is a few rows, so every program re-reads it (from L2) for this."""
    total = lax.fori_loop(0, k // bk, lambda i, acc: acc + row_squares(x_ref, tokens, i * bk, bk),
                          jnp.zeros((MIN_DOT, 1), jnp.float32))
    return lax.rsqrt(total / k + eps)


def x_tiles(x_ref, tokens: int, k0, bk: int, op: Operand, norm=None, rows=None) -> tuple:
    """x rows (padded to 16 by masked loads) for inputs k0:k0+bk: one [16, bk] tile, or for packed
    weights the even and odd columns as two [16, bk/2] tiles, or for fp8 under the float16 dot the tile
    as `f16_rows` returns it (rows in f16, their scales): made once per K step, whatever number of weight
    tiles (gate and up) the step multiplies it with.

    `norm` (norm_ref [R, K], row [1, 1] int32, scales from `rms_scales`): the rows are RMS-normalized first,
    x * scale * norm_ref[row] in float32 rounded to x's dtype, as the model's rms_norm computes them. With
    scales None only the norm weight is applied (x * norm_ref[row]; the caller scales the dot's result).
    `rows` (idx [1, cols] -> [16, cols] tile): computes the x rows instead of loading them from x_ref."""
    c = lax.broadcasted_iota(jnp.int32, (1, bk // 2 if op.packed else bk), 1)

    def load(idx):
        tile = x_rows(x_ref, tokens, idx) if rows is None else rows(idx)
        if norm is None:
            return tile
        norm_ref, row, scale = norm
        g = plgpu.load(norm_ref.at[row, idx]).astype(jnp.float32)
        xf = tile.astype(jnp.float32) if scale is None else tile.astype(jnp.float32) * scale
        return (xf * g).astype(tile.dtype)

    if not op.packed:
        return row_tiles(load(k0 + c), op, tokens)
    if op.fmt == "bf12":
        return bf12_tiles.shifted_x(load(k0 + 2 * c)), bf12_tiles.shifted_x(load(k0 + 2 * c + 1))
    return load(k0 + 2 * c), load(k0 + 2 * c + 1)


class FmaRows(tuple):
    """The real x rows of a K step, each float32 [1, bk], for the fp8 "fma" tile product (`fma_rows`)."""


FMA_MAX_ROWS = 4


def fma_rows(tile, tokens: int) -> FmaRows:
    """The first `tokens` rows of a [16, cols] tile as float32 [1, cols] vectors (Triton cannot slice a
    register tile, so each is the masked sum of the tile over its rows)."""
    r = lax.broadcasted_iota(jnp.int32, tile.shape, 0)
    xf = tile.astype(jnp.float32)
    return FmaRows(jnp.sum(jnp.where(r == i, xf, 0.0), axis=0, keepdims=True) for i in range(tokens))


def uses_fma(op: Operand, tokens: int | None) -> bool:
    """Whether an fp8 tile meets x as `fma_rows` (DGJAX_FP8_DOT=fma, at most FMA_MAX_ROWS real rows)."""
    return op.fmt == "fp8" and tokens is not None and tokens <= FMA_MAX_ROWS and fp8_dot() == "fma"


def row_tiles(tile, op: Operand, tokens: int | None = None) -> tuple:
    """A [16, cols] tile of rows (non-packed weights) as `tile_dot` takes it: itself, or for fp8 under the float16
    dot the `f16_rows` pair (under the a8 dot the `e4m3_rows` pair; under "fma" the real rows, `fma_rows`)."""
    if uses_fma(op, tokens):
        return fma_rows(tile, tokens)
    if not _scaled_rows_dot(op, tile.dtype):
        return (tile,)
    mode = fp8_dot()
    if mode in E4M3_DOTS:
        return e4m3_rows(tile) if mode == "a8" else e4m3_two_term_rows(tile)
    return f16_rows(tile)


def store_rows(o_ref, value, tokens: int):
    """Store the first `tokens` rows of a [16, cols] value into a [tokens, cols] block.

    Padding rows are masked, not clamped onto the last real row as loads do: the interpreter applies a
    masked store as read-select-write, and a clamped padding row would write the old value back.
    """
    r = lax.broadcasted_iota(jnp.int32, (MIN_DOT, 1), 0)
    c = lax.broadcasted_iota(jnp.int32, (1, value.shape[1]), 1)
    value = pdl.trigger_after(value)  # DGJAX_PDL_TRIGGER_AT=end: the kernel's dependents may launch from here
    plgpu.store(o_ref.at[r, c], value, mask=jnp.broadcast_to(r < tokens, value.shape))


def _e2m1(codes):
    """int32 e2m1 codes (0..15) -> float32: 4 * |value| is 2m for magnitude codes m < 2, else (2 + m&1) << (m>>1)."""
    m = codes & 7
    quarters = jnp.where(m < 2, 2 * m, (2 + (m & 1)) << (m >> 1))
    value = quarters.astype(jnp.float32) * 0.25
    return jnp.where(codes >= 8, -value, value)


def _e8m0(e):
    """uint8 biased exponents -> float32 2**(e - 127) from its bit pattern (255: NaN)."""
    e = e.astype(jnp.int32)
    bits = jnp.where(e == 0, jnp.int32(0x00400000), e << 23)
    bits = jnp.where(e == 255, jnp.int32(0x7FC00000), bits)
    return lax.bitcast_convert_type(bits, jnp.float32)


def _group_scales(s_ref, op: Operand, expert, n0, k0, bn: int, bk: int, cols: int):
    """float32 [bn, cols]: the scale of each weight element of the tile (cols = bk, or bk/2 when packed)."""
    groups = op.k // op.group
    per_step = max(1, bk // op.group)
    rows = n0 + lax.broadcasted_iota(jnp.int32, (bn, per_step), 0)
    first = lax.div(k0, op.group) + lax.broadcasted_iota(jnp.int32, (bn, per_step), 1)
    raw = plgpu.load(s_ref.at[(expert * op.n + rows) * groups + first])
    scale = _e8m0(raw) if op.fmt == "mxfp4" else raw.astype(jnp.float32)
    if per_step == 1:
        return jnp.broadcast_to(scale, (bn, cols))
    spread = jnp.broadcast_to(scale[:, :, None], (bn, per_step, cols // per_step))
    return spread.reshape(bn, cols)


def _zero_points(z_ref, op: Operand, expert, n0, k0, bn: int, bk: int, cols: int):
    """int32 [bn, cols] zero point of each weight element of the tile."""
    groups = op.k // op.group
    per_step = max(1, bk // op.group)
    rows = n0 + lax.broadcasted_iota(jnp.int32, (bn, per_step), 0)
    first = lax.div(k0, op.group) + lax.broadcasted_iota(jnp.int32, (bn, per_step), 1)
    z = plgpu.load(z_ref.at[(expert * op.n + rows) * groups + first]).astype(jnp.int32)
    if per_step == 1:
        return jnp.broadcast_to(z, (bn, cols))
    return jnp.broadcast_to(z[:, :, None], (bn, per_step, cols // per_step)).reshape(bn, cols)


F16_ROW_MAX_EXP = 14  # rows are scaled so their largest |value| lies in [2**14, 2**15) (f16 max 65504)
E4M3_ROW_MAX_EXP = 7  # ... and for the a8 dot in [2**7, 2**8) (e4m3 max 448)
E4M3_RESIDUAL_EXP = 5  # a8x2: each row's residual times 2**5 before its own e4m3 rounding (at most 2**8)
FP8_DOTS = ("x", "f16", "swap", "a8", "a8x2", "fma")
E4M3_DOTS = ("a8", "a8x2")  # both dot operands e4m3 (Hopper's fp8 wgmma through fp8_mma)
FP8_DOT_ENV = "DGJAX_FP8_DOT"


def fp8_dot() -> str:
    """The tensor-core dot of fp8 tiles with bf16/f16 x (read at trace time from $DGJAX_FP8_DOT):
    "f16" (default) in float16 through `f16_rows`; "x" in x's dtype; "swap": f16, weight tile first; "a8": x
    rounded to e4m3 per row and K step (`e4m3_rows`), an fp8 x fp8 dot, weight tile first (`swapped`); "a8x2"
    (A/B only): a8 plus the rounded residual of x as 16 more rows of the same dot (`e4m3_two_term_rows`), the
    default's accuracy at the default's speed on the H200 (qwen3-30b-a3b fp8 C1 busy 2.78 vs 2.77 ms a tick, a8
    2.66: benchmarks/results/2026-12-03-s21-placement-and-a8x2.md). The f16
    loop (Triton 3.9, sm_90) has 112 instead of 192 conversions per iteration; on the H200
    (benchmarks/results/2026-12-01-s6a-*) it took qwen3-30b-a3b fp8 C1 from 297.3 to 302.9 tok/s and
    glm-4.5-air fp8 from 130.0 to 138.3. "fma" (A/B only): at most FMA_MAX_ROWS real rows, the tile converted to
    float32 and multiplied on the CUDA cores (`fma_rows`; more rows take the f16 dot); it lost on the H200
    (benchmarks/results/2026-12-03-s17b-*): qwen3-30b-a3b fp8 C1 283.0 vs 367.3 tok/s, every swept stage slower."""
    choice = choose_impl(None, FP8_DOT_ENV, FP8_DOTS, "fp8 dot", default="f16")
    if choice in E4M3_DOTS:
        fp8_mma.install()
    return choice


def _scaled_rows_dot(op: Operand, x_dtype) -> bool:
    """Whether fp8 tiles meet rescaled x rows (f16, or e4m3 for "a8" / "a8x2") rather than x itself. float16
    rows under the default f16 dot meet the tile as they are: they are in range by construction (carrier.py)."""
    dtype = jnp.dtype(x_dtype)
    if dtype == jnp.float32 or (dtype == jnp.float16 and fp8_dot() == "f16"):
        return False
    return op.fmt == "fp8" and fp8_dot() in ("f16", "swap", "fma") + E4M3_DOTS


def carries_f16(op: Operand, x_dtype) -> bool:
    """Whether a kernel's bf16 rows should reach it as float16 (dgjax/pallas/carrier.py): fp8 weights under the
    default f16 dot, which then takes f16 rows as they are instead of rescaling x in every K step (`f16_rows`),
    unless $DGJAX_F16_CARRY (read at trace time) is "off" (for A/B)."""
    return (op is not None and op.fmt == "fp8" and jnp.dtype(x_dtype) == jnp.bfloat16 and fp8_dot() == "f16"
            and carrier.enabled())


def swapped(op: Operand, x_dtype) -> bool:
    """Whether `tile_dot` computes W_tile . x^T ([bn, 16]) instead of x . W_tile^T ([16, bn]) (DGJAX_FP8_DOT=swap).

    Why: with the 16 padded x rows as the dot's M, Triton on sm_90 issues mma.sync m16n8k16; with the
    converted weight tile as M (>= 64 columns) it issues the Hopper warpgroup MMA (wgmma m64n16k16, the
    weight operand from registers), checked in the PTX of XLA's deviceless compile. Same multiply-adds,
    another instruction. Kernels keep their accumulators in this orientation (`acc_zeros`) and turn them
    once at the end (`acc_rows`). It lost on the H200 (benchmarks/results/2026-12-01-s9c-*): qwen3-30b-a3b
    fp8 C1 319.3 vs 355.9 tok/s (device 3.20 vs 2.90 ms per tick), every swept fp8 launch slower (its
    weight tile reaches registers 2 bytes per shared-memory load), so the tensor-core instruction was not
    what bounds the fp8 tiles. It stays for A/B."""
    return _scaled_rows_dot(op, x_dtype) and fp8_dot() in ("swap",) + E4M3_DOTS


def two_terms(op: Operand, x_dtype) -> bool:
    """Whether x rows meet the tile as `e4m3_two_term_rows` (DGJAX_FP8_DOT=a8x2): 32 dot columns, not 16."""
    return _scaled_rows_dot(op, x_dtype) and fp8_dot() == "a8x2"


def acc_zeros(op: Operand, x_dtype, bn: int):
    """float32 zeros in `tile_dot`'s result orientation: [16, bn], or [bn, 16] when `swapped` ([bn, 32] under
    a8x2: each row's two terms side by side)."""
    if not swapped(op, x_dtype):
        return jnp.zeros((MIN_DOT, bn), jnp.float32)
    return jnp.zeros((bn, 2 * MIN_DOT if two_terms(op, x_dtype) else MIN_DOT), jnp.float32)


def acc_rows(op: Operand, x_dtype, acc):
    """An accumulator of `tile_dot` results as [16, bn] rows (transposed once if `swapped`; under a8x2 each
    row's two columns summed first)."""
    if two_terms(op, x_dtype):
        acc = jnp.sum(acc.reshape(acc.shape[0], MIN_DOT, 2), axis=2)
    return acc.T if swapped(op, x_dtype) else acc


def f16_rows(x):
    """A [rows, cols] tile as float16 rows scaled by powers of two, and those scales (float32 [rows]).

    Why: on the H200 an e4m3 tile reaches bf16 as two conversions per value (e4m3x2 -> f16x2, then
    f16 -> bf16, the second one unpaired), which bound the fp8 kernels (30-60% of the read ceiling);
    e4m3 -> f16 is one paired conversion, but the dot then needs x in float16. Every bf16 value in f16's
    normal range converts exactly, so each row is first multiplied by the power of two (exact) that puts
    its largest |value| in [2**14, 2**15), and the result by its inverse: nothing overflows, and only
    values more than 2**28 below their row's largest lose bits (f16 subnormals)."""
    xf, up, down = _pow2_rows(x, F16_ROW_MAX_EXP)
    return (xf * down[:, None]).astype(jnp.float16), up


def _pow2_rows(x, max_exp: int):
    """float32 x and per-row powers of two (up, down) that put each row's largest |value| in
    [2**max_exp, 2**(max_exp + 1)) once multiplied by `down` (both stay normal float32; zero rows: any)."""
    xf = x.astype(jnp.float32)
    amax = jnp.max(jnp.abs(xf), axis=1)
    biased = lax.shift_right_logical(lax.bitcast_convert_type(amax, jnp.int32), 23) & 0xFF  # exponent field
    shift = jnp.clip(biased - 127 - max_exp, -126, 126)
    up = lax.bitcast_convert_type((shift + 127) << 23, jnp.float32)  # 2**shift
    down = lax.bitcast_convert_type((127 - shift) << 23, jnp.float32)  # 2**-shift
    return xf, up, down


def e4m3_rows(x):
    """A [rows, cols] tile as e4m3 rows scaled by powers of two, and those scales (float32 [rows]).

    For DGJAX_FP8_DOT=a8: each row times the power of two that puts its largest |value| in [2**7, 2**8)
    (under e4m3's 448), rounded to nearest e4m3; values more than ~2**13 below their row's largest become
    e4m3 subnormals. The relative rounding error is at most 2**-4 a value: the activation side of the W8A8
    block-fp8 recipe (one scale per row and 128 inputs) that vLLM and SGLang run DeepSeek-style fp8
    checkpoints with."""
    xf, up, down = _pow2_rows(x, E4M3_ROW_MAX_EXP)
    return (xf * down[:, None]).astype(jnp.float8_e4m3fn), up


def e4m3_two_term_rows(x):
    """A [16, cols] tile as [32, cols] e4m3 rows and float32 [32] scales: row 2i is `e4m3_rows`' row i, row
    2i + 1 its residual (scaled row - that e4m3 row, at most half an e4m3 step) times 2**5 rounded to e4m3,
    its scale 2**-5 of row 2i's; so x_i ~ row 2i * scale 2i + row 2i+1 * scale 2i+1 (`acc_rows` adds the two
    columns of the product).

    For DGJAX_FP8_DOT=a8x2. Why: a8's one e4m3 term keeps 4 significant bits of x (~3% error on the largest
    output of a GEMV, s12e); the second keeps about 4 more, roughly a bf16 value's own 8. Both terms are
    columns of the same fp8 x fp8 dot (N = 32 instead of 16, one tensor-core instruction either way), so the
    weight tile still needs no conversion and each K step issues one dot."""
    xf, up, down = _pow2_rows(x, E4M3_ROW_MAX_EXP)
    scaled = xf * down[:, None]
    hi = scaled.astype(jnp.float8_e4m3fn).astype(jnp.float32)
    lo = (scaled - hi) * (2.0 ** E4M3_RESIDUAL_EXP)
    rows, cols = x.shape
    pairs = jnp.transpose(jnp.stack([hi, lo], axis=-1), (0, 2, 1))  # [rows, 2, cols]: hi_i, lo_i
    scales = jnp.stack([up, up * (2.0 ** -E4M3_RESIDUAL_EXP)], axis=-1)  # [rows, 2]
    return pairs.reshape(2 * rows, cols).astype(jnp.float8_e4m3fn), scales.reshape(2 * rows)


FP8_SCALE_ENV = "DGJAX_FP8_SCALE"
FP8_SCALE_MODES = ("auto", "prefetch", "vector")


def fp8_scale_mode() -> str:
    """$DGJAX_FP8_SCALE (read at trace time): "auto" (default: a tile inside one scale block takes one scalar,
    loaded in its K step), "prefetch" (that scalar loaded one K step ahead: `ScalePrefetch`), "vector" (one
    scale per column, the old loads; A/B)."""
    return choose_impl(None, FP8_SCALE_ENV, FP8_SCALE_MODES, "fp8 tile scale")


def one_scale_block(op: Operand, bn: int) -> bool:
    """Whether every bn-column tile of an fp8 weight lies inside one scale block (bn divides the block's rows)
    and takes its scale as a scalar (`fp8_scale_mode` not "vector")."""
    return fp8_scale_mode() != "vector" and op.scale_block[0] % bn == 0


class ScalePrefetch:
    """Scalar fp8 tile scales loaded one K step ahead of their dot ($DGJAX_FP8_SCALE=prefetch), for a kernel's K
    loop to carry: `first(...)` before the loop, `next(...)` inside each step for the step after. Where it is
    off both return None, which `tile_dot` takes as "load the scale here" and a loop carries as nothing, so a
    kernel carries (acc, scale) either way.

    Why: a scale loaded in its own K step is an `ld.global` whose latency the step's dots do not always cover:
    under Nsight Compute the multiply that waits on it held 4.6-6.6% of glm-4.5-air's fp8 GEMV warp samples
    (benchmarks/results/2026-12-03-s18-*). `on` is False (nothing carried) for other formats and modes."""

    def __init__(self, op: Operand, bn: int):
        self.op, self.bn = op, bn
        self.on = op.fmt == "fp8" and fp8_scale_mode() == "prefetch" and one_scale_block(op, bn)

    def first(self, w_refs, expert, k0, n0):
        """The scale of the step at k0 (w_refs: the weight's refs, as `tile_dot` takes them)."""
        return fp8_scales(w_refs[1], self.op, expert, k0, n0, self.bn) if self.on else None

    def next(self, w_refs, expert, k0, n0, bk: int):
        """The scale of the step after k0 (the last step's own scale again: every load stays in bounds)."""
        return self.first(w_refs, expert, jnp.minimum(k0 + bk, self.op.k - bk), n0)


def fp8_scales(s_ref, op: Operand, expert, k0, n0, bn: int):
    """The block scales of an fp8 tile's columns n0:n0+bn at K step k0: a scalar where the tile sits inside
    one scale block (`one_scale_block`), else float32 [bn] (one per column, [bn, 1] shaped by the caller).

    Why the scalar: a [bn] vector is loaded in a coalesced layout and must move to the dot accumulator's
    layout through shared memory (a store, two barriers and loads, every K step, behind the load's full
    latency: benchmarks/ptx_census.py on the MoE and GEMV loops); one value per tile multiplies the tile's
    dot result as it is. On the H200 (benchmarks/results/2026-12-03-s18b-*, qwen3-30b-a3b fp8 C1, same
    mode): the fp8 kernels' time a tick 1529 vs 1546 µs (gate/up 538.2 vs 543.8, down 410.4 vs 416.7);
    swept alone, gate/up 11.1 vs 11.3 µs, down 11.4 vs 11.6, q/k/v 7.7 vs 7.7."""
    (sb_n, sb_k), (nb, kb) = op.scale_block, op.scale_grid
    if one_scale_block(op, bn):
        return s_ref[(expert * nb + lax.div(n0, sb_n)) * kb + lax.div(k0, sb_k)]
    cols = n0 + lax.broadcasted_iota(jnp.int32, (bn,), 0)
    return plgpu.load(s_ref.at[(expert * nb + lax.div(cols, sb_n)) * kb + lax.div(k0, sb_k)])


def _cols(scale, axis: int):
    """A tile's column scales shaped to multiply a [16, bn] (axis 1) or [bn, 16] (axis 0) result."""
    if jnp.ndim(scale) == 0:
        return scale
    return scale[None, :] if axis == 1 else scale[:, None]


def tile_dot(xs: tuple, refs, op: Operand, expert, k0, n0, bk: int, bn: int, scale=None):
    """x tiles . (the expert's weight rows k0:k0+bk, columns n0:n0+bn) -> float32 [16, bn] ([bn, 16] where
    the tiles came from `x_tiles` of an fp8 weight and `swapped` holds). `scale`: an fp8 tile's scale already
    loaded (`ScalePrefetch`), else it is loaded here."""
    dtype = None if isinstance(xs, FmaRows) else xs[0].dtype
    if op.fmt == "plain":
        (w_ref,) = refs
        return plgpu.dot(xs[0], w_ref[expert, pl.ds(k0, bk), pl.ds(n0, bn)].astype(dtype))
    if op.fmt == "fp8":
        w_ref, s_ref = refs
        raw = w_ref[expert, pl.ds(n0, bn), pl.ds(k0, bk)]  # unmasked: no e4m3 fill value
        scale = fp8_scales(s_ref, op, expert, k0, n0, bn) if scale is None else scale  # or carried (ScalePrefetch)
        if isinstance(xs, FmaRows):  # CUDA cores: products summed along K per real row, no tensor-core dot
            w = raw.astype(jnp.float16).astype(jnp.float32)
            r = lax.broadcasted_iota(jnp.int32, (MIN_DOT, bn), 0)
            out = jnp.zeros((MIN_DOT, bn), jnp.float32)
            for i, row in enumerate(xs):
                out = jnp.where(r == i, jnp.sum(w * row, axis=1)[None, :], out)
            return out * _cols(scale, 1)
        if len(xs) == 1:
            return plgpu.dot(xs[0], raw.astype(dtype), trans_b=True) * _cols(scale, 1)
        x16, row_scale = xs  # the float16 dot's rows (x_tiles); e4m3 rows under a8 (a8x2: 32 of them)
        if fp8_dot() in E4M3_DOTS:  # both e4m3: wgmma e4m3 (fp8_mma), [bn, 16] ([bn, 32] under a8x2)
            return plgpu.dot(raw, x16, trans_b=True) * _cols(scale, 0) * row_scale[None, :]
        if fp8_dot() == "swap":  # [bn, 16]: see `swapped`
            out = plgpu.dot(raw.astype(jnp.float16), x16, trans_b=True)
            return out * _cols(scale, 0) * row_scale[None, :]
        out = plgpu.dot(x16, raw.astype(jnp.float16), trans_b=True)  # e4m3 -> f16: one paired convert
        return out * row_scale[:, None] * _cols(scale, 1)
    if op.fmt == "int8":
        w_ref, s_ref, *z = refs
        q = w_ref[expert, pl.ds(n0, bn), pl.ds(k0, bk)].astype(jnp.int32)
        if op.has_zero:
            q = q - _zero_points(z[0], op, expert, n0, k0, bn, bk, bk)
        w = q.astype(jnp.float32) * _group_scales(s_ref, op, expert, n0, k0, bn, bk, bk)
        return plgpu.dot(xs[0], w.astype(dtype), trans_b=True)
    if op.fmt == "bf12":
        even, odd = bf12_tiles.weight_tiles(refs, expert, k0, n0, bk, bn)
        x_even, x_odd = xs
        return (plgpu.dot(x_even, even.astype(dtype), trans_b=True)
                + plgpu.dot(x_odd, odd.astype(dtype), trans_b=True))
    half = bk // 2
    w_ref, s_ref, *extra = refs
    packed = w_ref[expert, pl.ds(n0, bn), pl.ds(lax.div(k0, 2), half)].astype(jnp.int32)
    nibbles = (packed & 15, packed >> 4)  # inputs k0 + 2c and k0 + 2c + 1
    scale = _group_scales(s_ref, op, expert, n0, k0, bn, bk, half)
    if op.fmt == "int4":
        zero = _zero_points(extra[0], op, expert, n0, k0, bn, bk, half) if op.has_zero else 0
        values = [(q - 8 - zero).astype(jnp.float32) for q in nibbles]
    else:
        values = [_e2m1(q) for q in nibbles]
    (x_even, x_odd), (v_even, v_odd) = xs, values
    out = (plgpu.dot(x_even, (v_even * scale).astype(dtype), trans_b=True)
           + plgpu.dot(x_odd, (v_odd * scale).astype(dtype), trans_b=True))
    if op.fmt == "nvfp4":
        out = out * extra[0][expert]
    return out
