"""How the MoE decode kernel reads one expert's weight tile in each format and multiplies it (inside a kernel).

Also the dense quantized GEMV's tile reader (dgjax/pallas/quant_gemv), which views a dense node as a
one-expert stack.

An expert-stacked weight stands for [E, K, N] (K contracted). Formats and the tile a K step reads:
- "plain": bf16/f16/f32 array in dgjax's input-major layout [E, K, N]: a [BK, BN] tile, one dot.
- "fp8" (`Fp8BlockWeight`): e4m3 [E, N, K] plus a float32 scale per (bn x bk) block: a [BN, BK] tile
  converted to x's dtype (exact); the dot is scaled per output column by its block's scale, so a K step
  stays inside one scale block.
- "nvfp4", "mxfp4", "int4" (packed nibbles [E, N, K/2], element 2i in the low nibble of byte i): a
  [BN, BK/2] byte tile; low and high nibbles are decoded separately and multiplied with the even and odd
  columns of x (two dots), so the nibbles never need re-interleaving. Their per-group scales (16 / 32 /
  group_size inputs) vary along K inside a tile: a compact [BN, BK/group] scale tile is loaded, broadcast
  over its groups and applied to the decoded weights before the dot (NVFP4's per-expert global scale
  multiplies the result).
- "int8" (`IntWeight` bits=8): int8 [E, N, K] with group scales: a [BN, BK] tile, scaled, one dot.
CUDA-core ("fma") tiles, for 1-4 rows (plain and fp8 only, `fma_supported`): the tensor-core dot pads x
to 16 rows and routes every decoded tile through shared memory into the MMA operand layout; at one or two
rows the same tile can instead be multiplied elementwise into a float32 accumulator of the tile's own
shape (one FMA per weight and row, in the layout the load produced) and reduced once after the K loop.
FP8 folds its block scale (one per tile: the tile sits inside one scale block) into the x row.
Quantized tiles are loaded unmasked (every dim is a multiple of the blocks; Triton cannot splat a fill
value into e4m3), decoded to float32, scaled, rounded to x's dtype for the tensor-core dot. The whole
weight is never dequantized.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.quant import Fp8BlockWeight, IntWeight, Mxfp4Weight, Nvfp4Weight, is_quantized

MIN_DOT = 16  # Triton's dot needs every dimension >= 16
FP8_DECODES = ("cast", "bits", "u8", "words")
TWO_POW_120 = float(2.0 ** 120)


def fp8_decode() -> str:
    """How tensor-core fp8 tiles are decoded (read at trace time, $DGJAX_FP8_DECODE; a GPU probe):
    "cast": Triton's e4m3 -> bf16 conversion; "bits": the e4m3 bits moved into a bf16 bit pattern with
    integer ops (the value times 2**-120, undone in the column scale); "u8": the raw bytes converted as
    integers (wrong values: times the load alone); "words": the values read as uint32 words of 4 e4m3
    codes (Triton's 1-byte tiles ran at 30-55% of the read ceiling whatever the decode, H200 2026-12-01),
    each byte lane moved into bf16 bits as in "bits" and multiplied with x's matching columns (4 dots)."""
    mode = os.environ.get("DGJAX_FP8_DECODE", "cast")
    if mode not in FP8_DECODES:
        raise ValueError(f"DGJAX_FP8_DECODE must be one of {FP8_DECODES}, got {mode!r}")
    return mode
PLAIN_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16), jnp.dtype(jnp.float32))
# Unscaled e4m3 arrays read as plain weights (converted tile by tile): the layout probe of benchmarks/launch_sweep.
PLAIN_WEIGHT_DTYPES = PLAIN_DTYPES + (jnp.dtype(jnp.float8_e4m3fn),)
PACKED = ("nvfp4", "mxfp4", "int4")


@dataclasses.dataclass(frozen=True)
class Operand:
    """Static description of one expert-stacked weight standing for [E, k, n]."""

    fmt: str  # plain | fp8 | nvfp4 | mxfp4 | int4 | int8
    experts: int
    k: int
    n: int
    num_arrays: int = 1
    scale_block: tuple[int, int] = (0, 0)  # fp8: (rows of n, columns of k) one scale covers
    scale_grid: tuple[int, int] = (0, 0)  # fp8: (nb, kb)
    group: int = 0  # packed / int8: inputs per scale
    has_zero: bool = False  # int: asymmetric (zero points)
    lanes: int = 1  # fp8 read as uint32 words: 4 codes per word (fp8_decode "words")

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
            lanes = 4 if fp8_decode() == "words" and k % 4 == 0 else 1
            return Operand("fp8", e, k, n, 2, tuple(w.block), tuple(w.scale.shape[1:]), lanes=lanes)
        if isinstance(w, Nvfp4Weight):
            return Operand("nvfp4", e, k, n, 3, group=16)
        if isinstance(w, Mxfp4Weight):
            return Operand("mxfp4", e, k, n, 2, group=32)
        if isinstance(w, IntWeight) and w.bits in (4, 8):
            zero = w.zero_point is not None
            return Operand("int4" if w.bits == 4 else "int8", e, k, n, 2 + zero, group=w.group_size, has_zero=zero)
        return None
    if not hasattr(w, "dtype") or len(getattr(w, "shape", ())) != 3 or jnp.dtype(w.dtype) not in PLAIN_WEIGHT_DTYPES:
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
        mode, weight = fp8_decode(), w.weight
        if op.lanes == 4:
            values = lax.bitcast_convert_type(weight.reshape(weight.shape[:-1] + (op.k // 4, 4)), jnp.uint32)
        else:
            values = weight if mode == "cast" else lax.bitcast_convert_type(weight, jnp.uint8)
        return op, (values, w.scale.astype(jnp.float32).reshape(-1))
    if op.fmt == "nvfp4":
        return op, (w.packed, w.block_scale.reshape(-1), w.global_scale.astype(jnp.float32).reshape(op.experts))
    if op.fmt == "mxfp4":
        return op, (w.packed, w.scale.reshape(-1))
    zero = (w.zero_point.reshape(-1),) if op.has_zero else ()
    return op, (w.values, w.scale.reshape(-1)) + zero


def _pow2(b: int) -> bool:
    return b > 0 and b & (b - 1) == 0  # Triton tiles are powers of two


def valid_block_n(op: Operand, bn: int) -> bool:
    return _pow2(bn) and bn >= MIN_DOT and op.n % bn == 0


def valid_block_k(op: Operand, bk: int) -> bool:
    """A K step divides K, feeds dots of >= 16 columns, and sits on the format's scale grid."""
    if not (_pow2(bk) and op.k % bk == 0 and bk >= MIN_DOT * _lanes(op)):
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


def k_loop(step, carry, k_steps: int, base, block_k: int, unroll: int, live=None):
    """carry = step(k0, carry) for the `k_steps` K steps k0 = base, base + block_k, ...: `unroll` steps per
    loop iteration (their loads issue together), then the remainder one at a time. `live` False: no step."""
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


def _lanes(op: Operand) -> int:
    """Inputs per stored element along K: 2 nibbles, 4 fp8 codes per uint32 word, else 1."""
    return 2 if op.packed else op.lanes


def x_tiles(x_ref, tokens: int, k0, bk: int, op: Operand) -> tuple:
    """x rows (padded to 16 by masked loads) for inputs k0:k0+bk: one [16, bk] tile, or for weights that
    store `lanes` inputs per element (nibbles, fp8 words) one [16, bk/lanes] tile per lane: lane j holds
    columns k0 + lanes*c + j."""
    lanes = _lanes(op)
    cols = bk // lanes
    r = lax.broadcasted_iota(jnp.int32, (MIN_DOT, 1), 0)
    c = lax.broadcasted_iota(jnp.int32, (1, cols), 1)
    ok = jnp.broadcast_to(r < tokens, (MIN_DOT, cols))
    r = jnp.minimum(r, tokens - 1)  # padding rows read the last real row, masked off
    return tuple(plgpu.load(x_ref.at[r, k0 + lanes * c + j], mask=ok, other=0) for j in range(lanes))


def store_rows(o_ref, value, tokens: int):
    """Store the first `tokens` rows of a [16, cols] value into a [tokens, cols] block.

    Padding rows are masked, not clamped onto the last real row as loads do: the interpreter applies a
    masked store as read-select-write, and a clamped padding row would write the old value back.
    """
    r = lax.broadcasted_iota(jnp.int32, (MIN_DOT, 1), 0)
    c = lax.broadcasted_iota(jnp.int32, (1, value.shape[1]), 1)
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


def tile_dot(xs: tuple, refs, op: Operand, expert, k0, n0, bk: int, bn: int):
    """x tiles . (the expert's weight rows k0:k0+bk, columns n0:n0+bn) -> float32 [16, bn]."""
    dtype = xs[0].dtype
    if op.fmt == "plain":
        (w_ref,) = refs
        return plgpu.dot(xs[0], w_ref[expert, pl.ds(k0, bk), pl.ds(n0, bn)].astype(dtype))
    if op.fmt == "fp8" and op.lanes == 4:
        w_ref, s_ref = refs
        words = w_ref[expert, pl.ds(n0, bn), pl.ds(lax.div(k0, 4), bk // 4)]
        (sb_n, sb_k), (nb, kb) = op.scale_block, op.scale_grid
        cols = n0 + lax.broadcasted_iota(jnp.int32, (bn,), 0)
        scale = plgpu.load(s_ref.at[(expert * nb + lax.div(cols, sb_n)) * kb + lax.div(k0, sb_k)]) * TWO_POW_120
        out = None
        for j, x_j in enumerate(xs):
            b = ((words >> (8 * j)) & 0xFF).astype(jnp.int32)
            w = lax.bitcast_convert_type((((b & 0x7F) << 4) | ((b & 0x80) << 8)).astype(jnp.int16), jnp.bfloat16)
            part = plgpu.dot(x_j, w.astype(dtype), trans_b=True)
            out = part if out is None else out + part
        return out * scale[None, :]
    if op.fmt == "fp8":
        w_ref, s_ref = refs
        raw = w_ref[expert, pl.ds(n0, bn), pl.ds(k0, bk)]  # unmasked: no e4m3 fill value
        mode = fp8_decode()
        if mode == "bits":
            b = raw.astype(jnp.int32)
            bits = ((b & 0x7F) << 4) | ((b & 0x80) << 8)
            w = lax.bitcast_convert_type(bits.astype(jnp.int16), jnp.bfloat16).astype(dtype)
        else:
            w = raw.astype(dtype)
        (sb_n, sb_k), (nb, kb) = op.scale_block, op.scale_grid
        cols = n0 + lax.broadcasted_iota(jnp.int32, (bn,), 0)
        scale = plgpu.load(s_ref.at[(expert * nb + lax.div(cols, sb_n)) * kb + lax.div(k0, sb_k)])
        if mode == "bits":
            scale = scale * TWO_POW_120
        return plgpu.dot(xs[0], w, trans_b=True) * scale[None, :]
    if op.fmt == "int8":
        w_ref, s_ref, *z = refs
        q = w_ref[expert, pl.ds(n0, bn), pl.ds(k0, bk)].astype(jnp.int32)
        if op.has_zero:
            q = q - _zero_points(z[0], op, expert, n0, k0, bn, bk, bk)
        w = q.astype(jnp.float32) * _group_scales(s_ref, op, expert, n0, k0, bn, bk, bk)
        return plgpu.dot(xs[0], w.astype(dtype), trans_b=True)
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


# ---------------------------------------------------------------- CUDA-core (fma) tiles

FMA_MAX_ROWS = 4  # one accumulator tile per row: more rows are the tensor core's job


def fma_supported(op: Operand, bn: int, bk: int) -> bool:
    """Whether `tile_fma` reads this weight with [bn, bk] tiles: plain, or fp8 with the tile inside one
    scale block (so one scale multiplies the whole tile)."""
    if op.fmt == "plain":
        return True
    if op.fmt == "fp8" and op.lanes == 1:
        sb_n, sb_k = op.scale_block
        return sb_n % bn == 0 and sb_k % bk == 0
    return False


def fma_zeros(op: Operand, bn: int, bk: int):
    """A float32 accumulator in the orientation of the weight tile ([bk, bn] plain, [bn, bk] fp8)."""
    return jnp.zeros((bk, bn) if op.fmt == "plain" else (bn, bk), jnp.float32)


def x_row(x_ref, r: int, k0, bk: int):
    """float32 [bk]: inputs k0:k0+bk of row r."""
    c = lax.broadcasted_iota(jnp.int32, (bk,), 0)
    return plgpu.load(x_ref.at[r, k0 + c]).astype(jnp.float32)


def tile_fma(rows: tuple, accs: tuple, refs, op: Operand, expert, k0, n0, bk: int, bn: int) -> tuple:
    """accs[r] += (weight tile) * x row r, elementwise (see the module doc); `rows` from `x_row`."""
    if op.fmt == "plain":
        (w_ref,) = refs
        w = w_ref[expert, pl.ds(k0, bk), pl.ds(n0, bn)].astype(jnp.float32)
        return tuple(acc + w * x[:, None] for acc, x in zip(accs, rows))
    w_ref, s_ref = refs
    (sb_n, sb_k), (nb, kb) = op.scale_block, op.scale_grid
    scale = s_ref[(expert * nb + lax.div(n0, sb_n)) * kb + lax.div(k0, sb_k)]
    if fp8_decode() != "cast":
        raise NotImplementedError("the fp8 decode probes run on the tensor-core path only")
    w = w_ref[expert, pl.ds(n0, bn), pl.ds(k0, bk)].astype(jnp.float32)
    return tuple(acc + w * (x * scale)[None, :] for acc, x in zip(accs, rows))


def fma_result(op: Operand, acc):
    """float32 [bn]: an accumulator tile summed over its K axis."""
    return jnp.sum(acc, axis=0 if op.fmt == "plain" else 1)


def store_row(o_ref, r: int, value):
    """Store a [cols] vector as row r of a [rows, cols] block."""
    c = lax.broadcasted_iota(jnp.int32, value.shape, 0)
    plgpu.store(o_ref.at[r, c], value)
