"""NVFP4 weights in NVIDIA ModelOpt's layout: e2m1 values, an e4m3 scale per 16 inputs, a float32 scale per tensor.

On disk (ModelOpt `hf_quant_config.json` quant_algo NVFP4 / config.json quant_method modelopt):
  weight          uint8          [N, K/2]   two e2m1 codes per byte, element 2i in the low nibble
  weight_scale    float8_e4m3fn  [N, K/16]
  weight_scale_2  float32        [] or [1]  per tensor
  input_scale     float32        [] or [1]  activation scale (unused by weight-only math; kept)
Decoding (as ModelOpt's `NVFP4QTensor.dequantize`): w = e2m1(code) * (float32(weight_scale) * weight_scale_2),
the two scales multiplied first in float32.

Device layout (`Nvfp4Weight`), leading expert axis for MoE stacks:
  packed       uint8          [*E, N, K/2]
  block_scale  float8_e4m3fn  [*E, N, K/16]
  global_scale float32        [*E]
  input_scale  float32        [*E] or None

Reference quantizer (ModelOpt's `NVFP4QTensor.quantize`, with each division written as a multiplication by
an explicit float32 reciprocal, because XLA rewrites x / broadcast(d) into x * (1/d) and numpy must match):
global = amax * f32(1/2688); block scale = fp8(block_amax * f32(1 / (6 * global))), 1 where block_amax is 0;
codes = e2m1(w * f32(1 / (float32(block scale) * global))). Additions that keep it total: a tensor with
amax < 2**-100 gets global scale 1 (all codes +-0); a block whose fp8 scale rounds to 0 gets zero codes (it
decodes to 0 either way); NaN/+-inf anywhere makes the global scale NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dgjax.quant import codes
from dgjax.quant.base import ArrayLayout, QuantizedWeight

BLOCK = 16
_INV_DENOM = np.float32(1.0 / (codes.E2M1_MAX * codes.FP8_MAX))  # 1 / 2688
_MIN_AMAX = np.float32(2.0**-100)


def _check_k(k: int) -> None:
    if k % BLOCK:
        raise ValueError(f"NVFP4 needs the input dimension to be a multiple of {BLOCK}, got {k}")


def quantize_np(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[..., N, K] -> (uint8 [..., N, K/2], float8_e4m3fn [..., N, K/16], float32 global scale [...])."""
    w = np.asarray(w, np.float32)
    n, k = w.shape[-2:]
    _check_k(k)
    amax = np.abs(w).max(axis=(-2, -1))
    glob = np.where(amax >= _MIN_AMAX, amax * _INV_DENOM, np.float32(1.0)).astype(np.float32)
    glob = np.where(np.isfinite(amax), glob, np.float32(np.nan))
    g = glob[..., None, None]
    block_amax = codes.block_amax_np(w, 1, BLOCK)
    bscale = block_amax * (np.float32(1.0) / (np.float32(codes.E2M1_MAX) * g)).astype(np.float32)
    bscale = codes.to_fp8_np(np.where(block_amax == 0, np.float32(1.0), bscale))
    step = bscale.astype(np.float32) * g
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = (np.float32(1.0) / step).astype(np.float32)
    scaled = w * codes.expand_blocks_np(inv, 1, BLOCK, n, k)
    codes_ = codes.e2m1_encode_np(scaled)
    codes_ = np.where(codes.expand_blocks_np(bscale.astype(np.float32), 1, BLOCK, n, k) == 0, np.uint8(0), codes_)
    return codes.pack_nibbles_np(codes_), bscale, glob


def dequantize_np(packed: np.ndarray, block_scale: np.ndarray, global_scale: np.ndarray) -> np.ndarray:
    """float32 [..., N, K]."""
    values = codes.e2m1_decode_np(codes.unpack_nibbles_np(packed))
    n, k = values.shape[-2:]
    step = np.asarray(block_scale).astype(np.float32) * np.asarray(global_scale, np.float32)[..., None, None]
    return values * codes.expand_blocks_np(step, 1, BLOCK, n, k)


def quantize(w: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """jnp twin of `quantize_np` (bit-identical)."""
    w = w.astype(jnp.float32)
    n, k = w.shape[-2:]
    _check_k(k)
    amax = codes.nan_max(jnp.abs(w), axis=(-2, -1))
    glob = jnp.where(amax >= _MIN_AMAX, amax * _INV_DENOM, jnp.float32(1.0))
    glob = jnp.where(jnp.isfinite(amax), glob, jnp.float32(jnp.nan))
    g = glob[..., None, None]
    block_amax = codes.block_amax(w, 1, BLOCK)
    bscale = block_amax * (jnp.float32(1.0) / (jnp.float32(codes.E2M1_MAX) * g))
    bscale = codes.to_fp8(jnp.where(block_amax == 0, jnp.float32(1.0), bscale))
    step = bscale.astype(jnp.float32) * g
    scaled = w * codes.expand_blocks(jnp.float32(1.0) / step, 1, BLOCK, n, k)
    codes_ = codes.e2m1_encode(scaled)
    codes_ = jnp.where(codes.expand_blocks(bscale.astype(jnp.float32), 1, BLOCK, n, k) == 0, jnp.uint8(0), codes_)
    return codes.pack_nibbles(codes_), bscale, glob


def dequantize(packed: jax.Array, block_scale: jax.Array, global_scale: jax.Array) -> jax.Array:
    """jnp twin of `dequantize_np` (bit-identical up to XLA:CPU's flush of subnormal results)."""
    values = codes.e2m1_decode(codes.unpack_nibbles(packed))
    n, k = values.shape[-2:]
    step = block_scale.astype(jnp.float32) * global_scale.astype(jnp.float32)[..., None, None]
    return values * codes.expand_blocks(step, 1, BLOCK, n, k)


@struct.dataclass
class Nvfp4Weight(QuantizedWeight):
    """uint8 codes [*E, N, K/2] + e4m3 block scales [*E, N, K/16] + float32 global scale [*E]; see module doc."""

    packed: jax.Array
    block_scale: jax.Array
    global_scale: jax.Array
    shape: tuple[int, ...] = struct.field(pytree_node=False)
    in_dims: int = struct.field(pytree_node=False)
    expert_dims: int = struct.field(pytree_node=False)
    input_scale: jax.Array | None = None

    format_name = "nvfp4"

    @classmethod
    def array_layout(cls, n: int, k: int, has_input_scale: bool = False) -> dict[str, ArrayLayout]:
        out = {
            "packed": ArrayLayout((n, k // 2), jnp.uint8, 1, 2),
            "block_scale": ArrayLayout((n, k // BLOCK), jnp.float8_e4m3fn, 1, BLOCK),
            "global_scale": ArrayLayout((), jnp.float32, None, None),
        }
        if has_input_scale:
            out["input_scale"] = ArrayLayout((), jnp.float32, None, None)
        return out

    def static_args(self) -> dict:
        return {"has_input_scale": self.input_scale is not None}

    def rows(self) -> jax.Array:
        return dequantize(self.packed, self.block_scale, self.global_scale)
