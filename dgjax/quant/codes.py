"""Element codes shared by the packed weight formats: e2m1 (fp4), e8m0 exponents, nibble packing, fp8 casts.

Each encoder/decoder exists twice, in numpy (the reference) and in jnp, doing the same float32 operations in
the same order so the two agree bit for bit. One platform caveat: XLA:CPU flushes float32 subnormal
*results* of arithmetic to zero (sign kept); numpy does not. Only values below 2**-126 are affected.

e2m1 code (4 bits): bit 3 = sign, bits 0-2 index the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
Encoding rounds to nearest, ties to even (the even code: 0.25 -> 0, 0.75 -> 1, 2.5 -> 2, 5 -> 4), saturates at
6 and takes the sign from the sign bit (so -0.0 and small negatives give code 8, "-0"); NaN encodes as 0 or 8.
This is what ml_dtypes' float4_e2m1fn cast and ModelOpt's / compressed-tensors' fp4 casts produce.

Nibble packing (NVFP4, MXFP4 and, through a little-endian int32 view, compressed-tensors int4): element 2i
of a row is the low nibble of byte i, element 2i+1 the high nibble.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

FP8_DTYPE = np.dtype(ml_dtypes.float8_e4m3fn)
FP8_MAX = 448.0
E2M1_MAX = 6.0
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                        -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)
# |y| above bound i moves the magnitude code past i; at the ties listed second it rounds up to the even code.
_E2M1_BOUNDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
_E2M1_TIES_UP = (0.75, 1.75, 3.5)
E8M0_NAN = 255
E8M0_BIAS = 127


def e2m1_encode_np(y: np.ndarray) -> np.ndarray:
    """float32 values -> uint8 e2m1 codes (0..15), round-to-nearest-even, saturating."""
    y = np.asarray(y, np.float32)
    a = np.abs(y)
    mag = np.zeros(y.shape, np.uint8)
    for b in _E2M1_BOUNDS:
        mag += a > np.float32(b)
    for t in _E2M1_TIES_UP:
        mag += a == np.float32(t)
    return mag | (np.signbit(y).astype(np.uint8) << 3)


def e2m1_encode(y: jax.Array) -> jax.Array:
    """jnp twin of `e2m1_encode_np`."""
    y = y.astype(jnp.float32)
    a = jnp.abs(y)
    mag = jnp.zeros(y.shape, jnp.uint8)
    for b in _E2M1_BOUNDS:
        mag = mag + (a > b).astype(jnp.uint8)
    for t in _E2M1_TIES_UP:
        mag = mag + (a == t).astype(jnp.uint8)
    return mag | (jnp.signbit(y).astype(jnp.uint8) << 3)


def e2m1_decode_np(codes: np.ndarray) -> np.ndarray:
    return E2M1_VALUES[np.asarray(codes) & 0xF]


def e2m1_decode(codes: jax.Array) -> jax.Array:
    return jnp.asarray(E2M1_VALUES)[(codes & 0xF).astype(jnp.int32)]


def pack_nibbles_np(codes: np.ndarray) -> np.ndarray:
    """[..., K] codes (< 16) -> [..., K/2] uint8, element 2i in the low nibble of byte i."""
    codes = np.asarray(codes, np.uint8)
    if codes.shape[-1] % 2:
        raise ValueError(f"nibble packing needs an even last dimension, got {codes.shape}")
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def pack_nibbles(codes: jax.Array) -> jax.Array:
    codes = codes.astype(jnp.uint8)
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_nibbles_np(packed: np.ndarray) -> np.ndarray:
    """[..., K/2] uint8 -> [..., K] codes."""
    packed = np.asarray(packed, np.uint8)
    return np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(packed.shape[:-1] + (2 * packed.shape[-1],))


def unpack_nibbles(packed: jax.Array) -> jax.Array:
    lo, hi = packed & 0xF, packed >> 4
    return jnp.stack([lo, hi], axis=-1).reshape(packed.shape[:-1] + (2 * packed.shape[-1],))


def e8m0_decode_np(e: np.ndarray) -> np.ndarray:
    """uint8 biased exponents -> float32 2**(e - 127); 255 is NaN; 0 is the subnormal 2**-127."""
    e = np.asarray(e, np.uint8)
    out = np.ldexp(np.float64(1.0), np.minimum(e, 254).astype(np.int32) - E8M0_BIAS).astype(np.float32)
    return np.where(e == E8M0_NAN, np.float32(np.nan), out)


def e8m0_decode(e: jax.Array) -> jax.Array:
    """jnp twin of `e8m0_decode_np`, built from float32 bit patterns (exact, no exp2).

    Byte 0 gives the subnormal 2**-127, which XLA:CPU arithmetic reads as 0 (see `mxfp4.dequantize`).
    """
    e32 = e.astype(jnp.uint32)
    bits = jnp.where(e32 == 0, jnp.uint32(0x00400000), e32 << 23)
    bits = jnp.where(e32 == E8M0_NAN, jnp.uint32(0x7FC00000), bits)
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


def to_fp8_np(y: np.ndarray) -> np.ndarray:
    """float32 -> float8_e4m3fn, round-to-nearest-even, saturating at +-448 (NaN stays NaN)."""
    return np.clip(np.asarray(y, np.float32), -FP8_MAX, FP8_MAX).astype(FP8_DTYPE)


def to_fp8(y: jax.Array) -> jax.Array:
    return jnp.clip(y.astype(jnp.float32), -FP8_MAX, FP8_MAX).astype(jnp.float8_e4m3fn)


def block_amax_np(w: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """max |w| over [rows, cols] tiles of the last two dims (edge tiles may be partial). NaN propagates."""
    w = np.abs(np.asarray(w, np.float32))
    *lead, n, k = w.shape
    nb, kb = -(-n // rows), -(-k // cols)
    padded = np.zeros((*lead, nb * rows, kb * cols), np.float32)
    padded[..., :n, :k] = w
    return padded.reshape(*lead, nb, rows, kb, cols).max(axis=(-3, -1))


def nan_max(x: jax.Array, axis) -> jax.Array:
    """max that returns NaN where any input is NaN (XLA's reduce-max may skip NaNs; numpy's does not)."""
    return jnp.where(jnp.isnan(x).any(axis=axis), jnp.float32(jnp.nan), x.max(axis=axis))


def block_amax(w: jax.Array, rows: int, cols: int) -> jax.Array:
    w = jnp.abs(w.astype(jnp.float32))
    *lead, n, k = w.shape
    nb, kb = -(-n // rows), -(-k // cols)
    pad = [(0, 0)] * len(lead) + [(0, nb * rows - n), (0, kb * cols - k)]
    padded = jnp.pad(w, pad)
    return nan_max(padded.reshape(*lead, nb, rows, kb, cols), axis=(-3, -1))


def expand_blocks_np(s: np.ndarray, rows: int, cols: int, n: int, k: int) -> np.ndarray:
    """Per-tile values [..., nb, kb] repeated over their tiles and cropped to [..., n, k]."""
    return np.repeat(np.repeat(s, rows, axis=-2), cols, axis=-1)[..., :n, :k]


def expand_blocks(s: jax.Array, rows: int, cols: int, n: int, k: int) -> jax.Array:
    return jnp.repeat(jnp.repeat(s, rows, axis=-2), cols, axis=-1)[..., :n, :k]
