"""MXFP4 weights (OCP Microscaling): e2m1 values with one power-of-two (e8m0) scale per 32 inputs.

On disk, two namings of the same bytes:
  gpt-oss (config quant_method "mxfp4"): `<param>_blocks` uint8 [N, K/32, 16] and `<param>_scales` uint8 [N, K/32]
    (for a Linear, <param> = `<module>.weight`; gpt-oss's stacked experts carry a leading expert axis);
  compressed-tensors format "mxfp4-pack-quantized": `weight_packed` uint8 [N, K/2], `weight_scale` uint8 [N, K/32].
Each byte holds two e2m1 codes, element 2i in the low nibble; a scale byte e means 2**(e - 127) (255 = NaN).
Decoding (as transformers' `convert_moe_packed_tensors`): w = e2m1(code) * 2**(e - 127), exact in float32.

Device layout (`Mxfp4Weight`), leading expert axis for MoE stacks:
  packed  uint8 [*E, N, K/2]   (the gpt-oss [N, K/32, 16] blocks viewed flat: same bytes)
  scale   uint8 [*E, N, K/32]  biased e8m0 exponents

Reference quantizer (triton_kernels' `downcast_to_mxfp`, rounding mode ROUND_UP, which produced gpt-oss): per
block d = amax * f32(1/6) (a multiplication: XLA would rewrite the division into one anyway), rounded up to a
power of two by bit arithmetic ((bits(d) + 0x7FFFFF) & 0x7F800000); the scale byte is that exponent field,
codes = e2m1(w * (1 / 2**e)) (round-to-nearest-even; no value exceeds 6). A block with amax < 2**-123 (zero
included) gets scale byte 0 and zero codes (so d is always a normal float); a block holding NaN or +-inf gets
scale 255 (NaN).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dgjax.quant import codes
from dgjax.quant.base import ArrayLayout, QuantizedWeight

BLOCK = 32
_MIN_AMAX = np.float32(2.0**-123)
_INV_MAX = np.float32(1.0 / codes.E2M1_MAX)


def _check_k(k: int) -> None:
    if k % BLOCK:
        raise ValueError(f"MXFP4 needs the input dimension to be a multiple of {BLOCK}, got {k}")


def quantize_np(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[..., N, K] -> (uint8 codes [..., N, K/2], uint8 e8m0 scales [..., N, K/32])."""
    w = np.asarray(w, np.float32)
    n, k = w.shape[-2:]
    _check_k(k)
    amax = codes.block_amax_np(w, 1, BLOCK)
    d = np.where(amax >= _MIN_AMAX, amax * _INV_MAX, np.float32(0.0)).astype(np.float32)
    exp_bits = (d.view(np.uint32) + np.uint32(0x007FFFFF)) & np.uint32(0x7F800000)
    rounded = exp_bits.view(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(rounded == 0, np.float32(0.0), np.float32(1.0) / rounded).astype(np.float32)
    scaled = w * codes.expand_blocks_np(inv, 1, BLOCK, n, k)
    scale = np.where(np.isfinite(amax), (exp_bits >> 23).astype(np.uint8), np.uint8(codes.E8M0_NAN))
    return codes.pack_nibbles_np(codes.e2m1_encode_np(scaled)), scale


def dequantize_np(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    values = codes.e2m1_decode_np(codes.unpack_nibbles_np(packed))
    n, k = values.shape[-2:]
    with np.errstate(over="ignore"):  # 6 * 2**127 is inf, as in float32 on the device
        return values * codes.expand_blocks_np(codes.e8m0_decode_np(scale), 1, BLOCK, n, k)


def quantize(w: jax.Array) -> tuple[jax.Array, jax.Array]:
    """jnp twin of `quantize_np`."""
    w = w.astype(jnp.float32)
    n, k = w.shape[-2:]
    _check_k(k)
    amax = codes.block_amax(w, 1, BLOCK)
    d = jnp.where(amax >= _MIN_AMAX, amax * _INV_MAX, jnp.float32(0.0))
    exp_bits = (jax.lax.bitcast_convert_type(d, jnp.uint32) + jnp.uint32(0x007FFFFF)) & jnp.uint32(0x7F800000)
    rounded = jax.lax.bitcast_convert_type(exp_bits, jnp.float32)
    inv = jnp.where(rounded == 0, jnp.float32(0.0), jnp.float32(1.0) / rounded)
    scaled = w * codes.expand_blocks(inv, 1, BLOCK, n, k)
    scale = jnp.where(jnp.isfinite(amax), (exp_bits >> 23).astype(jnp.uint8), jnp.uint8(codes.E8M0_NAN))
    return codes.pack_nibbles(codes.e2m1_encode(scaled)), scale


def dequantize(packed: jax.Array, scale: jax.Array) -> jax.Array:
    """jnp twin of `dequantize_np` (bit-identical up to XLA:CPU's flush of subnormal results).

    Exponent byte 0 (2**-127) is a subnormal float32, which flush-to-zero hardware reads as 0; it is applied
    as * 0.5 then * 2**-126 so every product that is a normal float comes out exact.
    """
    values = codes.e2m1_decode(codes.unpack_nibbles(packed))
    n, k = values.shape[-2:]
    e = codes.expand_blocks(scale, 1, BLOCK, n, k)
    pre = jnp.where(e == 0, jnp.float32(0.5), jnp.float32(1.0))
    step = codes.e8m0_decode(jnp.maximum(e, 1))
    step = jnp.where(e == codes.E8M0_NAN, jnp.float32(jnp.nan), step)
    return (values * pre) * step


@struct.dataclass
class Mxfp4Weight(QuantizedWeight):
    """uint8 codes [*E, N, K/2] + uint8 e8m0 scales [*E, N, K/32]; see module doc."""

    packed: jax.Array
    scale: jax.Array
    shape: tuple[int, ...] = struct.field(pytree_node=False)
    in_dims: int = struct.field(pytree_node=False)
    expert_dims: int = struct.field(pytree_node=False)

    format_name = "mxfp4"

    @classmethod
    def array_layout(cls, n: int, k: int) -> dict[str, ArrayLayout]:
        return {
            "packed": ArrayLayout((n, k // 2), jnp.uint8, 1, 2),
            "scale": ArrayLayout((n, k // BLOCK), jnp.uint8, 1, BLOCK),
        }

    def rows(self) -> jax.Array:
        return dequantize(self.packed, self.scale)
