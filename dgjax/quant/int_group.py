"""int4 / int8 weights with a scale (and optional zero point) per group of inputs, compressed-tensors style.

On disk (config quant_method "compressed-tensors", weights type "int", strategy "group" or "channel"):
  format "pack-quantized": `weight_packed` int32 [N, ceil(K / (32/bits))]: value j of a row sits in word
    j // (32/bits) at bit (j % (32/bits)) * bits, stored unsigned as q + 2**(bits-1);
    `weight_scale` [N, K/group] (the model's float dtype); `weight_shape` int [2] = (N, K);
    asymmetric only: `weight_zero_point` int32 [ceil(N / (32/bits)), K/group], packed the same way along N.
  format "int-quantized" (8 bit): `weight` int8 [N, K], `weight_scale` [N, K/group], optional
    `weight_zero_point` int8 [N, K/group].
A "channel" strategy is one group spanning the whole row (scale [N, 1]).
Decoding (compressed-tensors `dequantize`): w = (q - zero_point) * scale. In float32 that product is exact for
bf16/f16 scales; rounding it to the model dtype gives what compressed-tensors computes in that dtype.

Device layout (`IntWeight`), leading expert axis for MoE stacks:
  values      bits=4: uint8 [*E, N, K/2], element 2i in the low nibble of byte i, stored as q + 8
              (the little-endian bytes of the checkpoint's int32 words: no repacking);
              bits=8: int8 [*E, N, K] holding q itself
  scale       the checkpoint's float dtype (bfloat16 / float16 / float32) [*E, N, K/group]
  zero_point  int8 [*E, N, K/group] holding the signed zero point, or None (symmetric)

Reference quantizer (compressed-tensors `calculate_qparams` + `quantize`, min-max observer): per group
min <= 0 <= max; symmetric: scale = max(|min|, |max|) / ((qmax - qmin) / 2) (7.5 for int4, 127.5 for int8);
asymmetric: scale = (max - min) / (qmax - qmin), zero point = clamp(round(qmin - min / scale)); scales are
clamped to >= float32 eps and rounded to `scale_dtype`, then q = clamp(round(w / scale + zero_point)),
rounding half to even.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from flax import struct

from dgjax.quant import codes
from dgjax.quant.base import ArrayLayout, QuantizedWeight


def q_range(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _groups(x: np.ndarray, group: int) -> np.ndarray:
    *lead, n, k = x.shape
    if k % group:
        raise ValueError(f"input dimension {k} is not a multiple of the group size {group}")
    return x.reshape(*lead, n, k // group, group)


def quantize_np(w: np.ndarray, bits: int, group: int, symmetric: bool = True,
                scale_dtype=ml_dtypes.bfloat16) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """[..., N, K] -> (int8 q [..., N, K], scale [..., N, K/group] in scale_dtype, int8 zero point or None)."""
    w = np.asarray(w, np.float32)
    if not np.isfinite(w).all():
        raise ValueError("cannot quantize non-finite weights to integers")
    qmin, qmax = q_range(bits)
    g = _groups(w, group)
    lo = np.minimum(g.min(axis=-1), np.float32(0.0))
    hi = np.maximum(g.max(axis=-1), np.float32(0.0))
    eps = np.finfo(np.float32).eps
    if symmetric:
        scale = np.maximum(np.maximum(-lo, hi) / np.float32((qmax - qmin) / 2), eps)
    else:
        scale = np.maximum((hi - lo) / np.float32(qmax - qmin), eps)
    scale = scale.astype(np.float32).astype(scale_dtype)
    s32 = scale.astype(np.float32)
    zp = None
    if not symmetric:
        zp = np.clip(np.rint(np.float32(qmin) - lo / s32), qmin, qmax).astype(np.int8)
    shifted = g / s32[..., None] + (0 if zp is None else zp.astype(np.float32)[..., None])
    q = np.clip(np.rint(shifted), qmin, qmax).astype(np.int8).reshape(w.shape)
    return q, scale, zp


def dequantize_np(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, group: int) -> np.ndarray:
    """float32 [..., N, K] = (q - zero_point) * scale, per group."""
    q = np.asarray(q).astype(np.int32)
    if zero_point is not None:
        q = q - np.repeat(np.asarray(zero_point).astype(np.int32), group, axis=-1)
    return q.astype(np.float32) * np.repeat(np.asarray(scale).astype(np.float32), group, axis=-1)


# ---------------------------------------------------------------- compressed-tensors int32 packing


def pack_int32_np(q: np.ndarray, bits: int, axis: int = -1) -> np.ndarray:
    """Signed q (2-D) -> int32 words along `axis` (compressed-tensors `pack_to_int32`), zero-padded."""
    q = np.asarray(q)
    if q.ndim != 2:
        raise ValueError("pack_int32_np packs 2-D tensors")
    per = 32 // bits
    u = (q.astype(np.int32) + (1 << (bits - 1))).astype(np.uint32)
    u = np.moveaxis(u, axis, -1)
    pad = -u.shape[-1] % per
    u = np.pad(u, [(0, 0), (0, pad)])
    words = np.zeros(u.shape[:-1] + (u.shape[-1] // per,), np.uint32)
    for i in range(per):
        words |= u[..., i::per] << np.uint32(bits * i)
    return np.moveaxis(words, -1, axis).view(np.int32)


def unpack_int32_np(words: np.ndarray, bits: int, size: int, axis: int = -1) -> np.ndarray:
    """int32 words -> signed int8 values along `axis`, cropped to `size` (compressed-tensors `unpack_from_int32`)."""
    w = np.moveaxis(np.asarray(words).view(np.uint32), axis, -1)
    per = 32 // bits
    mask = np.uint32((1 << bits) - 1)
    parts = [(w >> np.uint32(bits * i)) & mask for i in range(per)]
    u = np.stack(parts, axis=-1).reshape(w.shape[:-1] + (w.shape[-1] * per,))[..., :size]
    return np.moveaxis((u.astype(np.int32) - (1 << (bits - 1))).astype(np.int8), -1, axis)


def device_values_np(words: np.ndarray, bits: int, k: int) -> np.ndarray:
    """Checkpoint `weight_packed` int32 [..., N, P] -> device `values` (a byte view, no repacking)."""
    b = np.ascontiguousarray(words).view(np.uint8)
    if bits == 4:
        if k % 2:
            raise ValueError(f"int4 rows need an even input dimension, got {k}")
        return b[..., : k // 2]
    if bits == 8:
        return (b[..., :k] ^ np.uint8(0x80)).view(np.int8)
    raise ValueError(f"unsupported integer width {bits}")


def values_from_q_np(q: np.ndarray, bits: int) -> np.ndarray:
    """Signed q [..., N, K] -> device `values`."""
    q = np.asarray(q)
    if bits == 8:
        return q.astype(np.int8)
    return codes.pack_nibbles_np((q.astype(np.int16) + 8).astype(np.uint8))


def q_from_values_np(values: np.ndarray, bits: int) -> np.ndarray:
    if bits == 8:
        return np.asarray(values, np.int8)
    return (codes.unpack_nibbles_np(values).astype(np.int16) - 8).astype(np.int8)


def dequantize(values: jax.Array, scale: jax.Array, zero_point: jax.Array | None, bits: int, group: int) -> jax.Array:
    """jnp decoder of the device layout; bit-identical to `dequantize_np` on the corresponding q."""
    if bits == 4:
        q = codes.unpack_nibbles(values).astype(jnp.int32) - 8
    else:
        q = values.astype(jnp.int32)
    if zero_point is not None:
        q = q - jnp.repeat(zero_point.astype(jnp.int32), group, axis=-1)
    return q.astype(jnp.float32) * jnp.repeat(scale.astype(jnp.float32), group, axis=-1)


@struct.dataclass
class IntWeight(QuantizedWeight):
    """int4 (nibbles) / int8 values [*E, N, K or K/2] + group scales [*E, N, K/group] (+ int8 zero points)."""

    values: jax.Array
    scale: jax.Array
    shape: tuple[int, ...] = struct.field(pytree_node=False)
    in_dims: int = struct.field(pytree_node=False)
    expert_dims: int = struct.field(pytree_node=False)
    bits: int = struct.field(pytree_node=False, default=4)
    group_size: int = struct.field(pytree_node=False, default=128)
    zero_point: jax.Array | None = None

    format_name = "int"

    @classmethod
    def array_layout(cls, n: int, k: int, bits: int = 4, group_size: int = 128, scale_dtype=jnp.bfloat16,
                     asymmetric: bool = False) -> dict[str, ArrayLayout]:
        g = k // group_size
        out = {
            "values": ArrayLayout((n, k // 2), jnp.uint8, 1, 2) if bits == 4 else ArrayLayout((n, k), jnp.int8, 1, 1),
            "scale": ArrayLayout((n, g), scale_dtype, 1, group_size),
        }
        if asymmetric:
            out["zero_point"] = ArrayLayout((n, g), jnp.int8, 1, group_size)
        return out

    def static_args(self) -> dict:
        return {"bits": self.bits, "group_size": self.group_size, "scale_dtype": self.scale.dtype,
                "asymmetric": self.zero_point is not None}

    def rows(self) -> jax.Array:
        return dequantize(self.values, self.scale, self.zero_point, self.bits, self.group_size)
