"""FP8 block-scaled weights (DeepSeek-V3, Qwen3-*-FP8, GLM-*-FP8): e4m3 values with one float32 scale per tile.

On disk: `weight` float8_e4m3fn [N, K] and `weight_scale_inv` float32 [ceil(N/bn), ceil(K/bk)] (bn x bk =
`weight_block_size`, 128 x 128 in every public release; edge tiles may be partial). Despite its name,
`weight_scale_inv` multiplies: w[i, j] = float32(weight[i, j]) * weight_scale_inv[i // bn, j // bk].

Device layout (`Fp8BlockWeight`): the same two arrays, leading expert axis for MoE stacks:
  weight  float8_e4m3fn [*E, N, K]
  scale   float32       [*E, ceil(N/bn), ceil(K/bk)]

Reference quantizer (vLLM's `per_block_cast_to_fp8` arithmetic; producers differ in details, the decoder
does not): per tile amax = max |w| in float32; tiles with amax >= 2**-117 get scale = amax * f32(1/448) (a
normal float) and values fp8(clip(w * f32(1 / scale), -448, 448)), round-to-nearest-even; smaller or zero
tiles get scale 1 (their values round to +-0); a tile holding NaN or +-inf gets a NaN scale, so it never
decodes as finite. Divisions are written as multiplications by explicit reciprocals because XLA rewrites
x / broadcast(d) into x * (1/d): this keeps numpy and jnp bit-identical.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dgjax.quant import codes
from dgjax.quant.base import ArrayLayout, QuantizedWeight

DEFAULT_BLOCK = (128, 128)
_MIN_AMAX = np.float32(2.0**-117)  # amax / 448 stays a normal float32 above this
_INV_MAX = np.float32(1.0 / codes.FP8_MAX)


def _scale_from_amax_np(amax: np.ndarray) -> np.ndarray:
    scale = np.where(amax >= _MIN_AMAX, amax * _INV_MAX, np.float32(1.0)).astype(np.float32)
    return np.where(np.isfinite(amax), scale, np.float32(np.nan))


def quantize_np(w: np.ndarray, block: tuple[int, int] = DEFAULT_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """[..., N, K] float -> (float8_e4m3fn [..., N, K], float32 scale [..., ceil(N/bn), ceil(K/bk)])."""
    w = np.asarray(w, np.float32)
    n, k = w.shape[-2:]
    scale = _scale_from_amax_np(codes.block_amax_np(w, *block))
    inv = (np.float32(1.0) / scale).astype(np.float32)
    values = codes.to_fp8_np(w * codes.expand_blocks_np(inv, *block, n, k))
    return values, scale


def dequantize_np(values: np.ndarray, scale: np.ndarray, block: tuple[int, int] = DEFAULT_BLOCK) -> np.ndarray:
    """float32 [..., N, K] = float32(values) * the tile's scale."""
    n, k = values.shape[-2:]
    return values.astype(np.float32) * codes.expand_blocks_np(np.asarray(scale, np.float32), *block, n, k)


def quantize(w: jax.Array, block: tuple[int, int] = DEFAULT_BLOCK) -> tuple[jax.Array, jax.Array]:
    """jnp twin of `quantize_np` (bit-identical)."""
    w = w.astype(jnp.float32)
    n, k = w.shape[-2:]
    amax = codes.block_amax(w, *block)
    scale = jnp.where(amax >= _MIN_AMAX, amax * _INV_MAX, jnp.float32(1.0))
    scale = jnp.where(jnp.isfinite(amax), scale, jnp.float32(jnp.nan))
    inv = jnp.float32(1.0) / scale
    return codes.to_fp8(w * codes.expand_blocks(inv, *block, n, k)), scale


def dequantize(values: jax.Array, scale: jax.Array, block: tuple[int, int] = DEFAULT_BLOCK) -> jax.Array:
    """jnp twin of `dequantize_np` (bit-identical)."""
    n, k = values.shape[-2:]
    return values.astype(jnp.float32) * codes.expand_blocks(scale.astype(jnp.float32), *block, n, k)


ACT_MAX_EXP = 7  # rounded activations: each group's largest |value| scaled into [2**7, 2**8), under e4m3's 448
ACT_RESIDUAL_EXP = 5  # a8x2: the residual, at most half an e4m3 step (<= 2**3 at the top), times 2**5 (<= 2**8)


def round_activations(x: jax.Array, group: int, terms: int = 1) -> jax.Array:
    """x [rows, K] with each row's consecutive `group` inputs rounded as e4m3 after a power-of-two scale
    (then scaled back): the activation side of the fp8 x fp8 decode dot (DGJAX_FP8_DOT=a8 / a8x2), written
    independently of the kernel for its reference. The scale 2**s puts the group's largest |value| in
    [2**7, 2**8) (s from its float32 exponent field, held to [-126, 126]), so only e4m3's rounding (at most
    2**-4 of a value, round-to-nearest-even) and its subnormals (values ~2**13 below the largest) change
    anything; zero groups stay zero. terms=1 returns x's dtype (e4m3 values are bf16/f16 values).
    terms=2 (a8x2) also rounds the residual (scaled value - its e4m3), times 2**ACT_RESIDUAL_EXP, to e4m3
    and returns float32 (e4m3 + residual / 2**ACT_RESIDUAL_EXP) * 2**s: about 8 significant bits, a bf16
    value's own precision."""
    if terms not in (1, 2):
        raise ValueError(f"terms must be 1 or 2, got {terms}")
    rows, k = x.shape
    xf = x.astype(jnp.float32).reshape(rows, k // group, group)
    amax = jnp.max(jnp.abs(xf), axis=-1, keepdims=True)
    exponent = (jax.lax.bitcast_convert_type(amax, jnp.int32) >> 23) & 0xFF
    shift = jnp.clip(exponent - 127 - ACT_MAX_EXP, -126, 126)
    scale = jax.lax.bitcast_convert_type((shift + 127) << 23, jnp.float32)  # 2**shift, exactly
    scaled = xf / scale
    rounded = scaled.astype(jnp.float8_e4m3fn).astype(jnp.float32)
    if terms == 1:
        return (rounded * scale).reshape(rows, k).astype(x.dtype)
    up = jnp.float32(2.0 ** ACT_RESIDUAL_EXP)
    residual = ((scaled - rounded) * up).astype(jnp.float8_e4m3fn).astype(jnp.float32) / up
    return ((rounded + residual) * scale).reshape(rows, k)


@struct.dataclass
class Fp8BlockWeight(QuantizedWeight):
    """float8_e4m3fn weight [*E, N, K] + float32 tile scales [*E, ceil(N/bn), ceil(K/bk)]; see module doc."""

    weight: jax.Array
    scale: jax.Array
    shape: tuple[int, ...] = struct.field(pytree_node=False)
    in_dims: int = struct.field(pytree_node=False)
    expert_dims: int = struct.field(pytree_node=False)
    block: tuple[int, int] = struct.field(pytree_node=False, default=DEFAULT_BLOCK)

    format_name = "fp8_block"

    @classmethod
    def array_layout(cls, n: int, k: int, block: tuple[int, int] = DEFAULT_BLOCK) -> dict[str, ArrayLayout]:
        bn, bk = block
        return {
            "weight": ArrayLayout((n, k), jnp.float8_e4m3fn, 1, 1),
            "scale": ArrayLayout((-(-n // bn), -(-k // bk)), jnp.float32, bn, bk),
        }

    def static_args(self) -> dict:
        return {"block": tuple(self.block)}

    def rows(self) -> jax.Array:
        return dequantize(self.weight, self.scale, tuple(self.block))
