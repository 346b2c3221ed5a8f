"""How a kernel reads bf12 weights (dgjax/quant/bf12.py): rebuilding a tile's bf16 values, x's exact shift, and
the epilogue (row scales, escapes). Used by the quantized GEMV through moe_decode/tiles.py.

A K step loads a [bn, bk/2] tile of byte pairs (uint16: input 2i's byte low, 2i+1's high) and one of code
pairs (uint8: 2i's code low nibble, 2i+1's high) and rebuilds the even and odd inputs as two bf16 tiles, each
value = sign and mantissa from its byte, exponent field = its code (the weight times 2**(15 - row top); code 0
rebuilds +-0). Two ways, the same bits:
- "asm" (default on the GPU): PTX over four byte pairs at once. A byte permute copies each byte into both
  halves of its 16-bit lane, so one mask keeps the sign (bit 15) and the mantissa (bits 0-6); the code nibbles,
  split once per four pairs, are permuted into their lanes and shifted to bits 7-10. About 2.4 integer
  operations a weight where the jnp arithmetic took ~10: on the H200 that arithmetic bound the kernel
  (llama's gate/up: 2.1-2.4 TB/s of bf12 bytes; benchmarks/results/2026-12-04-s25a-*).
- "jnp": the same arithmetic in jnp (any backend; the Pallas interpreter runs only this one).
`$DGJAX_BF12_DECODE` (asm | jnp, read at trace time) picks; default asm on a GPU, jnp elsewhere.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas.launch import choose_impl
from dgjax.quant import bf12

X_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float32))  # x * 2**X_SHIFT would overflow float16
ROWS = 16  # the kernels' padded x rows (Triton's dot needs >= 16)
ENV_VAR = "DGJAX_BF12_DECODE"
MODES = ("asm", "jnp")

# One block per half (Pallas' inline asm returns one result): $0,$1 the even (or odd) inputs as bf16 pairs 0-1,
# 2-3; $2,$3 byte pairs 0-1, 2-3 (bytes e0 o0 e1 o1 / e2 o2 e3 o3); $4 code pairs 0-3 (a byte each: even code in
# the low nibble, odd in the high one).
def _asm(odd: bool) -> str:
    nibbles = "shr.b32 c, $4, 4;\nand.b32 c, c, 0x0F0F0F0F;" if odd else "and.b32 c, $4, 0x0F0F0F0F;"
    byte = "0x3311" if odd else "0x2200"  # each lane: its byte twice (sign -> bit 15, mantissa -> bits 0-6)
    lane = """prmt.b32 $%(o)d, $%(i)d, 0, %(byte)s;
prmt.b32 t, c, 0, %(codes)s;
shl.b32 t, t, 7;
and.b32 $%(o)d, $%(o)d, 0x807F807F;
or.b32 $%(o)d, $%(o)d, t;"""
    body = "\n".join(lane % dict(o=o, i=o + 2, byte=byte, codes=codes) for o, codes in ((0, "0x4140"), (1, "0x4342")))
    return "{\n.reg .b32 c, t;\n" + nibbles + "\n" + body + "\n}"


_EVEN_ASM, _ODD_ASM = _asm(False), _asm(True)


def check_rows(op_fmt: str, x_dtype) -> None:
    """Refuse x rows a bf12 kernel cannot shift exactly (X_DTYPES): what the MoE kernels check at launch."""
    if op_fmt == "bf12" and jnp.dtype(x_dtype) not in X_DTYPES:
        raise ValueError(f"bf12 experts take bfloat16 or float32 rows, not {jnp.dtype(x_dtype)}")


def decode_mode() -> str:
    default = "asm" if jax.default_backend() == "gpu" else "jnp"
    return choose_impl(None, ENV_VAR, MODES, "bf12 tile decode", default=default)


def shifted_x(tile):
    """x columns times 2**X_SHIFT (exact in bf16/f32 below 2**28): they meet the tiny rebuilt weights."""
    return tile * jnp.asarray(2.0 ** bf12.X_SHIFT, tile.dtype)


def _decode_jnp(lw, cw):
    lw, cw = lw.astype(jnp.int32), cw.astype(jnp.int32)
    even = ((lw & 0x80) << 8) | ((cw & 0x0F) << 7) | (lw & 0x7F)
    odd = (lw & 0x8000) | ((cw & 0xF0) << 3) | ((lw >> 8) & 0x7F)
    as_bf16 = lambda bits: lax.bitcast_convert_type(bits.astype(jnp.uint16), jnp.bfloat16)  # noqa: E731
    return as_bf16(even), as_bf16(odd)


def _decode_asm(lw, cw):
    like = [jax.ShapeDtypeStruct(lw.shape, jnp.bfloat16)]
    return tuple(plgpu.elementwise_inline_asm(asm, args=[lw, cw], constraints="=r,=r,r,r,r", pack=4,
                                              result_shape_dtypes=like)[0] for asm in (_EVEN_ASM, _ODD_ASM))


def weight_tiles(refs, expert, k0, n0, bk: int, bn: int):
    """The even and odd inputs of the tile (inputs k0:k0+bk, rows n0:n0+bn) as bf16 [bn, bk/2] each."""
    low_ref, codes_ref = refs[0], refs[1]
    cols = pl.ds(lax.div(k0, 2), bk // 2)
    lw = low_ref[expert, pl.ds(n0, bn), cols]
    cw = codes_ref[expert, pl.ds(n0, bn), cols]
    return _decode_asm(lw, cw) if decode_mode() == "asm" else _decode_jnp(lw, cw)


def _table_index(row0, bn: int, slots: int):
    """[bn, slots] flat indices into the escape tables ([rows * slots]) of weight rows row0 .. row0 + bn."""
    return (row0 + lax.broadcasted_iota(jnp.int32, (bn, slots), 0)) * slots + \
        lax.broadcasted_iota(jnp.int32, (bn, slots), 1)


def finish(acc, refs, x_ref, n: int, slots: int, expert, n0, bn: int, tokens: int, escapes):
    """A program's result [16, bn] from its accumulated dots: times the row scales, plus (where `escapes`, a
    traced bool: one K split of each column block) every escape of these rows, x[col] * exact value, read from
    the rows' tables (padding slots hold bits 0 and add nothing). `n`: the weight's rows."""
    scale_ref, cols_ref, bits_ref = refs[2], refs[3], refs[4]
    rows = expert * n + n0 + lax.broadcasted_iota(jnp.int32, (bn,), 0)
    out = acc * plgpu.load(scale_ref.at[rows])[None, :]
    idx = _table_index(expert * n + n0, bn, slots)
    live = jnp.broadcast_to(escapes, (bn, slots))
    bits = plgpu.load(bits_ref.at[idx], mask=live, other=0).astype(jnp.int32)
    cols = plgpu.load(cols_ref.at[idx], mask=live, other=0).astype(jnp.int32)
    valid = bits != 0
    value = lax.bitcast_convert_type(bits << 16, jnp.float32)
    r = lax.broadcasted_iota(jnp.int32, (ROWS, 1), 0)
    for i in range(tokens):
        xv = plgpu.load(x_ref.at[i, cols], mask=valid, other=0).astype(jnp.float32)
        fix = jnp.sum(jnp.where(valid, xv * value, 0.0), axis=1)
        out = out + jnp.where(r == i, fix[None, :], 0.0)
    return out


def finish_rows(acc, refs, x_ref, rows, ok, n: int, slots: int, expert, n0, bn: int, half: int | None = None):
    """`finish` for a tile of many x rows (the MoE prefill's grouped GEMM): acc float32 [bm, bn] of x rows
    `rows` ([bm, 1] int32, `ok` masks them) -> times the expert's row scales, plus every escape of these weight
    rows, one [bm, bn] gather of x a table slot, over only the slots some row of the tile fills (escapes are
    rare: most tiles have none or one). `half`: x is deinterleaved (its even columns, then its odd ones from
    column `half`), so column c sits at c // 2 + (c % 2) * half."""
    scale_ref, cols_ref, bits_ref = refs[2], refs[3], refs[4]
    base = expert * n + n0 + lax.broadcasted_iota(jnp.int32, (1, bn), 1)  # [1, bn] weight rows
    out = acc * plgpu.load(scale_ref.at[base])
    mask = jnp.broadcast_to(ok, acc.shape)
    table = _table_index(expert * n + n0, bn, slots)
    filled = jnp.max(jnp.sum((plgpu.load(bits_ref.at[table]) != 0).astype(jnp.int32), axis=1))  # slots in use

    def add_slot(s, out):
        bits = plgpu.load(bits_ref.at[base * slots + s]).astype(jnp.int32)  # [1, bn]
        cols = plgpu.load(cols_ref.at[base * slots + s]).astype(jnp.int32)
        if half is not None:
            cols = (cols >> 1) + (cols & 1) * half
        value = lax.bitcast_convert_type(bits << 16, jnp.float32)
        live = mask & (bits != 0)
        xv = plgpu.load(x_ref.at[rows, cols], mask=live, other=0).astype(jnp.float32)  # [bm, bn]
        return out + jnp.where(live, xv * value, 0.0)

    return lax.fori_loop(0, filled, add_slot, out)
