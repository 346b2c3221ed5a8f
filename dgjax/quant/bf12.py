"""bf12: a lossless 12-bit re-encoding of bf16 weights (25% fewer bytes for a memory-bound decode to read).

Per weight one byte holds the sign and the 7 mantissa bits, and a 4-bit code the exponent relative to a per-row
base; values outside the row's 15-exponent window escape to a small per-row side table holding their exact
bf16 bits. Decoding rebuilds every bf16 bit pattern exactly (NaN payloads, -0 and subnormals included).

Device layout (`Bf12Weight`, rows = the checkpoint's [N, K] orientation like every dgjax.quant node):
  low          uint16  [N, K/2]  element i: input 2i's byte in bits 0-7, input 2i+1's in bits 8-15; a byte is
                                 sign << 7 | mantissa (the bf16's bit 15 and bits 0-6)
  codes        uint8   [N, K/2]  element i: input 2i's code in the low nibble, input 2i+1's in the high one
  row_scale    float32 [N]       2**(top - 115), top = the row's largest exponent field (see below)
  escape_cols  uint16  [N, E]    inputs of the row's escapes, ascending, then padding 0
  escape_bits  uint16  [N, E]    their exact bf16 bits; padding 0 (an escape is never +0, so 0 marks padding)
(`low` is the plain byte plane [N, K] viewed two bytes at a time, so a kernel loads even and odd inputs apart.)

Codes: with top = the row's largest exponent field among its normal finite values (127 if it has none), an
exponent e in [top - 14, top] gets code c = e - top + 15 (1..15). Code 0 is everything else: +-0 (byte = the
sign, no table entry), and the escapes (byte 0, exact bits in the table): subnormals, infinities, NaNs and
normal values more than 14 exponents below the row's top.

Why code 0, not 15, escapes: a kernel rebuilds each weight as the bf16 with exponent field c and the byte's
sign and mantissa (the weight times 2**(15 - top)), so code 0 is bf16 exponent 0: +-0 for a zero byte, with no
select in the kernel's inner loop, and the escapes' exact values are added from the table once per row. Those
rebuilt values are tiny (2**-126 .. 2**-111), so the kernel's dot meets them with x times 2**X_SHIFT (exact in
bf16), which keeps every product a normal float32; the row scale 2**(top - 15 - X_SHIFT) undoes both.

Encodable: K even and <= 65536 (uint16 escape columns), every row at most MAX_ESCAPES escapes, top <= 240
(row scales stay normal float32). `encode_np` / `node_from` raise `Bf12Unencodable` otherwise; the load-time
converter then keeps that weight in bf16. Gaussian weights escape about 1.6 in 10,000 (4096 x 4096, std 0.02:
at most 5 in a row); ../shared/REFERENCE.md puts trained checkpoints at 2-7 in 10,000.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dgjax.quant.base import ArrayLayout, QuantizedWeight

WINDOW = 15  # exponents a row's codes cover (codes 1..15)
X_SHIFT = 100  # the kernel multiplies x by 2**X_SHIFT so products with the decoded (tiny) weights stay normal
MAX_ESCAPES = 64
MIN_ESCAPE_SLOTS = 16  # table width floor: one width for most matrices, so sibling projections still fuse
MAX_TOP = 240
MAX_K = 1 << 16


class Bf12Unencodable(ValueError):
    """The matrix cannot be bf12-encoded (too many escapes in a row, K too large or odd, huge values)."""


def _bits_np(w) -> np.ndarray:
    w = np.asarray(w)
    if w.dtype == np.uint16:
        return w
    if w.dtype != jnp.bfloat16:
        raise TypeError(f"bf12 encodes bf16 weights (or their uint16 bits), got {w.dtype}")
    return w.view(np.uint16)


def slots_for(count: int) -> int:
    """Table width for a matrix whose worst row has `count` escapes: a power of two >= MIN_ESCAPE_SLOTS."""
    width = MIN_ESCAPE_SLOTS
    while width < count:
        width *= 2
    return width


def exponent_scale_np(top: np.ndarray) -> np.ndarray:
    """float32 row scales 2**(top - WINDOW - X_SHIFT): a code-c weight rebuilt as the bf16 of exponent field c is
    its value times 2**(c - e) = 2**(WINDOW - top), and x meets it times 2**X_SHIFT."""
    return ((np.asarray(top, np.int32) - WINDOW - X_SHIFT + 127) << 23).astype(np.int32).view(np.float32)


def _check_shape(k: int) -> None:
    if k % 2 or k > MAX_K:
        raise Bf12Unencodable(f"bf12 needs an even input dim of at most {MAX_K}, got {k}")


def analyse_np(bits: np.ndarray):
    """(top [..., N], code [..., N, K] uint8, byte [..., N, K] uint8, escape mask [..., N, K])."""
    bits = bits.astype(np.int32)
    e = (bits >> 7) & 0xFF
    normal = (e >= 1) & (e <= 254)
    top = np.where(normal, e, 0).max(axis=-1)
    top = np.where(normal.any(axis=-1), top, 127).astype(np.int32)
    inside = normal & (e >= top[..., None] - (WINDOW - 1))
    zero = (bits & 0x7FFF) == 0
    code = np.where(inside, e - top[..., None] + WINDOW, 0).astype(np.uint8)
    sign = (bits >> 8) & 0x80
    byte = np.where(inside, sign | (bits & 0x7F), np.where(zero, sign, 0)).astype(np.uint8)
    return top, code, byte, ~inside & ~zero


def encode_np(w) -> dict[str, np.ndarray]:
    """bf16 [..., N, K] (or its uint16 bits) -> the `Bf12Weight` arrays (numpy reference encoder)."""
    bits = _bits_np(w)
    k = bits.shape[-1]
    _check_shape(k)
    top, code, byte, escape = analyse_np(bits)
    counts = escape.sum(axis=-1)
    worst = int(counts.max()) if counts.size else 0
    if worst > MAX_ESCAPES:
        raise Bf12Unencodable(f"a row has {worst} escapes (> {MAX_ESCAPES})")
    if top.size and int(top.max()) > MAX_TOP:
        raise Bf12Unencodable(f"a row's largest exponent field {int(top.max())} exceeds {MAX_TOP}")
    slots = slots_for(worst)
    order = np.argsort(~escape, axis=-1, kind="stable")[..., :slots]  # escape positions first, ascending
    if slots > k:  # a tiny matrix: the table is wider than its rows
        order = np.pad(order, [(0, 0)] * (order.ndim - 1) + [(0, slots - k)])
    valid = np.arange(slots) < counts[..., None]
    cols = np.where(valid, order, 0).astype(np.uint16)
    esc_bits = np.where(valid, np.take_along_axis(bits, order, axis=-1), 0).astype(np.uint16)
    low = (byte[..., 0::2].astype(np.uint16) | (byte[..., 1::2].astype(np.uint16) << 8)).astype(np.uint16)
    codes = (code[..., 0::2] | (code[..., 1::2] << 4)).astype(np.uint8)
    return dict(low=low, codes=codes, row_scale=exponent_scale_np(top), escape_cols=cols, escape_bits=esc_bits)


def top_from_scale_np(row_scale: np.ndarray) -> np.ndarray:
    return ((np.asarray(row_scale, np.float32).view(np.int32) >> 23) & 0xFF) - 127 + WINDOW + X_SHIFT


def decode_np(low, codes, row_scale, escape_cols, escape_bits) -> np.ndarray:
    """The exact bf16 bits, uint16 [..., N, K] (numpy reference decoder)."""
    low, codes = np.asarray(low, np.uint16), np.asarray(codes, np.uint8)
    byte = np.stack([low & 0xFF, low >> 8], axis=-1).reshape(low.shape[:-1] + (-1,)).astype(np.int32)
    code = np.stack([codes & 15, codes >> 4], axis=-1).reshape(codes.shape[:-1] + (-1,)).astype(np.int32)
    top = top_from_scale_np(row_scale)[..., None]
    e = top + code - WINDOW
    bits = np.where(code > 0, ((byte & 0x80) << 8) | (e << 7) | (byte & 0x7F), (byte & 0x80) << 8)
    esc_bits = np.asarray(escape_bits, np.uint16)
    valid = esc_bits != 0
    lead = np.indices(esc_bits.shape)[:-1]
    rows = tuple(idx[valid] for idx in lead)
    bits[rows + (np.asarray(escape_cols)[valid].astype(np.int64),)] = esc_bits[valid]
    return bits.astype(np.uint16)


# ---------------------------------------------------------------- jnp twins (device-side conversion)


def _analyse(w: jax.Array):
    bits = jax.lax.bitcast_convert_type(w.astype(jnp.bfloat16), jnp.uint16).astype(jnp.int32)
    e = (bits >> 7) & 0xFF
    normal = (e >= 1) & (e <= 254)
    top = jnp.where(jnp.any(normal, axis=-1), jnp.max(jnp.where(normal, e, 0), axis=-1), 127)
    inside = normal & (e >= top[..., None] - (WINDOW - 1))
    zero = (bits & 0x7FFF) == 0
    code = jnp.where(inside, e - top[..., None] + WINDOW, 0)
    sign = (bits >> 8) & 0x80
    byte = jnp.where(inside, sign | (bits & 0x7F), jnp.where(zero, sign, 0))
    return top, code, byte, ~inside & ~zero, bits


def encode(w: jax.Array, slots: int) -> tuple[jax.Array, ...]:
    """jnp twin of `encode_np` (bit-identical) with the table width `slots` given (jit-static): (low, codes,
    row_scale, escape_cols, escape_bits). `node_from` checks the escape counts and row tops first."""
    top, code, byte, escape, bits = _analyse(w)
    k = w.shape[-1]
    position = jnp.arange(k, dtype=jnp.int32)
    score = jnp.where(escape, k - position, 0)  # earliest escapes score highest
    best, _ = jax.lax.top_k(score, min(slots, k))
    if slots > k:  # a tiny matrix: the table is wider than its rows
        best = jnp.pad(best, [(0, 0)] * (best.ndim - 1) + [(0, slots - k)])
    valid = best > 0
    order = jnp.where(valid, k - best, 0)
    cols = order.astype(jnp.uint16)
    esc_bits = jnp.where(valid, jnp.take_along_axis(bits, order, axis=-1), 0).astype(jnp.uint16)
    low = (byte[..., 0::2] | (byte[..., 1::2] << 8)).astype(jnp.uint16)
    codes = (code[..., 0::2] | (code[..., 1::2] << 4)).astype(jnp.uint8)
    scale = jax.lax.bitcast_convert_type((top - WINDOW - X_SHIFT + 127) << 23, jnp.float32)
    return low, codes, scale, cols, esc_bits


def node_from(w: jax.Array, shape: tuple[int, ...], in_dims: int, expert_dims: int = 0,
              out_shardings: Any = None) -> "Bf12Weight":
    """Encode a bf16 matrix [*E, N, K] already on the device: one pass counts each row's escapes and tops (one
    small transfer to the host), the next encodes with that table width (`out_shardings`: the five arrays').
    Raises `Bf12Unencodable` where `encode_np` would."""
    _check_shape(w.shape[-1])
    counts, tops = _checks(w)
    worst, top = int(counts), int(tops)
    if worst > MAX_ESCAPES:
        raise Bf12Unencodable(f"a row has {worst} escapes (> {MAX_ESCAPES})")
    if top > MAX_TOP:
        raise Bf12Unencodable(f"a row's largest exponent field {top} exceeds {MAX_TOP}")
    slots = slots_for(worst)
    arrays = _encoder(slots, out_shardings)(w)
    return Bf12Weight(*arrays, shape=tuple(shape), in_dims=in_dims, expert_dims=expert_dims, slots=slots)


@jax.jit
def _checks(w):
    top, _, _, escape, _ = _analyse(w)
    return jnp.max(jnp.sum(escape, axis=-1, dtype=jnp.int32), initial=0), jnp.max(top, initial=0)


@functools.lru_cache(maxsize=64)
def _encoder(slots: int, out_shardings: Any):
    return jax.jit(functools.partial(encode, slots=slots), out_shardings=out_shardings)


def decode(low, codes, row_scale, escape_cols, escape_bits) -> jax.Array:
    """jnp twin of `decode_np`: bf16 [..., N, K] with exactly the encoded bits. One elementwise pass writes the
    16-bit patterns, then the escapes are scattered into that buffer (the reference path runs this for every
    prefill chunk: no 32-bit temporaries of the whole matrix)."""
    top = ((jax.lax.bitcast_convert_type(row_scale.astype(jnp.float32), jnp.int32) >> 23) & 0xFF) - 127 + WINDOW \
        + X_SHIFT
    base = (top[..., None] - WINDOW).astype(jnp.int32)

    def half(byte, code):
        bits = jnp.where(code > 0, ((byte & 0x80) << 8) | ((base + code) << 7) | (byte & 0x7F), (byte & 0x80) << 8)
        return bits.astype(jnp.uint16)

    lw, cw = low.astype(jnp.int32), codes.astype(jnp.int32)
    pairs = jnp.stack([half(lw & 0xFF, cw & 15), half(lw >> 8, cw >> 4)], axis=-1)
    k, slots = 2 * low.shape[-1], escape_cols.shape[-1]
    flat = pairs.reshape(-1, k)
    cols = jnp.where(escape_bits != 0, escape_cols.astype(jnp.int32), k).reshape(-1, slots)  # padding: dropped
    rows = jnp.arange(flat.shape[0], dtype=jnp.int32)[:, None]
    flat = flat.at[rows, cols].set(escape_bits.reshape(-1, slots), mode="drop")
    return jax.lax.bitcast_convert_type(flat.reshape(low.shape[:-1] + (k,)), jnp.bfloat16)


@struct.dataclass
class Bf12Weight(QuantizedWeight):
    """bf16 weight [*E, N, K] re-encoded losslessly in 12 bits a value plus a per-row escape table; see module doc."""

    low: jax.Array
    codes: jax.Array
    row_scale: jax.Array
    escape_cols: jax.Array
    escape_bits: jax.Array
    shape: tuple[int, ...] = struct.field(pytree_node=False)
    in_dims: int = struct.field(pytree_node=False)
    expert_dims: int = struct.field(pytree_node=False)
    slots: int = struct.field(pytree_node=False, default=MIN_ESCAPE_SLOTS)

    format_name = "bf12"

    @classmethod
    def array_layout(cls, n: int, k: int, slots: int = MIN_ESCAPE_SLOTS) -> dict[str, ArrayLayout]:
        # the escape columns index the whole row: the K axis must not be split (col_block None keeps it whole)
        return {
            "low": ArrayLayout((n, k // 2), jnp.uint16, 1, None),
            "codes": ArrayLayout((n, k // 2), jnp.uint8, 1, None),
            "row_scale": ArrayLayout((n,), jnp.float32, 1, None),
            "escape_cols": ArrayLayout((n, slots), jnp.uint16, 1, None),
            "escape_bits": ArrayLayout((n, slots), jnp.uint16, 1, None),
        }

    def static_args(self) -> dict:
        return {"slots": int(self.slots)}

    def bf16_rows(self) -> jax.Array:
        """The exact bf16 matrix [*E, N, K]."""
        return decode(self.low, self.codes, self.row_scale, self.escape_cols, self.escape_bits)

    def rows(self) -> jax.Array:
        return self.bf16_rows().astype(jnp.float32)

    def widened(self, slots: int) -> "Bf12Weight":
        """The same weight with escape tables `slots` wide (padding slots: column 0, bits 0)."""
        pad = [(0, 0)] * (self.escape_cols.ndim - 1) + [(0, slots - self.slots)]
        return self.replace(escape_cols=jnp.pad(self.escape_cols, pad), escape_bits=jnp.pad(self.escape_bits, pad),
                            slots=slots)

    @staticmethod
    def align_for_concat(nodes):
        """Siblings joined row-wise (fused q/k/v, gate/up) need one table width: the widest."""
        slots = max(n.slots for n in nodes)
        return [n if n.slots == slots else n.widened(slots) for n in nodes]
