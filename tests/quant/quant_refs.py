"""Independent computations the format tests compare dgjax.quant against.

Written from the producers' published code (ModelOpt, compressed-tensors, triton_kernels, transformers) in
torch or plain Python, sharing nothing with dgjax.quant but the formats' definitions. Where transformers
ships a decoder (FP8 blocks, gpt-oss MXFP4) the tests call it directly.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import torch

E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def edge_values() -> np.ndarray:
    """float32 values that stress rounding: e2m1 / fp8 grid points, midpoints and their neighbours, extremes."""
    grid = np.array(E2M1_MAGNITUDES, np.float64)
    mids = (grid[1:] + grid[:-1]) / 2
    fp8 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    fp8 = np.sort(fp8[np.isfinite(fp8)])
    fp8_mids = (fp8[1:] + fp8[:-1]) / 2
    base = np.concatenate([grid, mids, fp8[::7], fp8_mids[::5], [448.0, 464.0, 500.0, 7.0, 5.5, 6.5, 1e-3, 2.0**-9,
                                                                 2.0**-10, 3 * 2.0**-11, 1e30, 2.0**-100]])
    base = base.astype(np.float32)
    up, down = np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(0))
    vals = np.concatenate([base, up, down])
    return np.concatenate([vals, -vals, np.float32([0.0, -0.0])]).astype(np.float32)


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    """What XLA:CPU sees / produces for float32 subnormals: +-0 with the sign kept."""
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), x), x).astype(np.float32)


def bits(x) -> np.ndarray:
    """Raw bits of a float array (so NaN == NaN and -0 != +0 in comparisons)."""
    x = np.asarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


# ---------------------------------------------------------------- e2m1


def e2m1_code_bruteforce(v: float) -> int:
    """Nearest e2m1 magnitude (ties to the even code), saturating, sign from the sign bit; NaN -> 0 magnitude."""
    a = abs(v)
    if math.isnan(a):
        mag = 0
    elif a >= 6.0:  # saturate (float64 distances from huge values would all tie)
        mag = 7
    else:
        dist = [abs(a - m) for m in E2M1_MAGNITUDES]
        best = min(dist)
        candidates = [i for i, d in enumerate(dist) if d == best]
        mag = min(candidates, key=lambda i: i % 2) if len(candidates) > 1 else candidates[0]
    return mag | (8 if math.copysign(1.0, v) < 0 else 0)


def modelopt_cast_fp4(x: torch.Tensor) -> torch.Tensor:
    """ModelOpt's `NVFP4QTensor._cast_fp4` (searchsorted on the rounding bounds), sign from torch.signbit."""
    bounds = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    a = x.abs()
    ord_ = torch.searchsorted(bounds, a.contiguous(), out_int32=True).to(torch.uint8)
    ties_up = torch.any(a.unsqueeze(-1) == bounds[[1, 3, 5]], dim=-1).to(torch.uint8)
    return (torch.signbit(x).to(torch.uint8) << 3) + ord_ + ties_up


def lut_decode(codes: torch.Tensor) -> torch.Tensor:
    lut = torch.tensor(list(E2M1_MAGNITUDES) + [-m for m in E2M1_MAGNITUDES], dtype=torch.float32)
    return lut[codes.long()]


def torch_unpack_pairs(packed: torch.Tensor) -> torch.Tensor:
    """ModelOpt's unpack: out[..., 0::2] = byte & 0xF, out[..., 1::2] = byte >> 4."""
    out = torch.empty(packed.shape[:-1] + (2 * packed.shape[-1],), dtype=torch.uint8)
    out[..., 0::2] = packed & 0x0F
    out[..., 1::2] = packed >> 4
    return out


def torch_pack_pairs(codes: torch.Tensor) -> torch.Tensor:
    return (codes[..., 1::2] << 4) | codes[..., 0::2]


# ---------------------------------------------------------------- FP8 blocks


def fp8_block_quantize_torch(w: np.ndarray, block=(128, 128)) -> tuple[np.ndarray, np.ndarray]:
    """vLLM `per_block_cast_to_fp8` arithmetic, tile by tile, with dgjax's small-tile / non-finite rules."""
    x = torch.from_numpy(np.ascontiguousarray(w, np.float32))
    n, k = x.shape
    bn, bk = block
    nb, kb = -(-n // bn), -(-k // bk)
    scale = torch.empty((nb, kb), dtype=torch.float32)
    out = torch.empty((n, k), dtype=torch.float8_e4m3fn)
    for i in range(nb):
        for j in range(kb):
            tile = x[i * bn : (i + 1) * bn, j * bk : (j + 1) * bk]
            amax = tile.abs().max()
            if not torch.isfinite(amax):
                s = torch.tensor(float("nan"))
            elif amax >= 2.0**-117:
                s = amax * torch.tensor(1 / 448, dtype=torch.float32)
            else:
                s = torch.tensor(1.0)
            scale[i, j] = s
            inv = torch.tensor(1.0, dtype=torch.float32) / s
            out[i * bn : (i + 1) * bn, j * bk : (j + 1) * bk] = (tile * inv).clamp(-448, 448).to(torch.float8_e4m3fn)
    return out.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn), scale.numpy()


def fp8_block_dequantize_transformers(values: np.ndarray, scale: np.ndarray, block=(128, 128)) -> np.ndarray:
    from transformers.integrations.finegrained_fp8 import _dequantize_fp8_weight

    w = torch.from_numpy(np.ascontiguousarray(values).view(np.uint8)).view(torch.float8_e4m3fn)
    s = torch.from_numpy(np.asarray(scale, np.float32))
    return _dequantize_fp8_weight(w, s, list(block), torch.float32).numpy()


# ---------------------------------------------------------------- NVFP4


def nvfp4_quantize_torch(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ModelOpt `NVFP4QTensor.quantize` with reciprocal multiplies (see dgjax.quant.nvfp4), in torch."""
    x = torch.from_numpy(np.ascontiguousarray(w, np.float32))
    n, k = x.shape
    one = torch.tensor(1.0, dtype=torch.float32)
    amax = x.abs().max()
    if not torch.isfinite(amax):
        g = torch.tensor(float("nan"))
    elif amax >= 2.0**-100:
        g = amax * torch.tensor(1 / 2688, dtype=torch.float32)
    else:
        g = one
    blocks = x.view(n, k // 16, 16)
    block_amax = blocks.abs().amax(-1)
    bscale = block_amax * (one / (torch.tensor(6.0) * g))
    bscale[block_amax == 0] = 1.0
    bscale8 = bscale.clamp(-448, 448).to(torch.float8_e4m3fn)
    step = bscale8.to(torch.float32) * g
    codes = modelopt_cast_fp4(blocks * (one / step).unsqueeze(-1)).view(n, k)
    codes = torch.where((bscale8.to(torch.float32) == 0).repeat_interleave(16, -1), torch.zeros_like(codes), codes)
    return (torch_pack_pairs(codes).numpy(), bscale8.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn),
            np.float32(g.item()))


def nvfp4_dequantize_torch(packed: np.ndarray, block_scale: np.ndarray, global_scale) -> np.ndarray:
    """ModelOpt `NVFP4QTensor.dequantize` (non-fast path)."""
    codes = torch_unpack_pairs(torch.from_numpy(np.asarray(packed)))
    vals = lut_decode(codes)
    n, k = vals.shape
    s = torch.from_numpy(np.ascontiguousarray(block_scale).view(np.uint8)).view(torch.float8_e4m3fn).to(torch.float32)
    per_block = s * torch.tensor(np.float32(global_scale))
    return (vals.view(n, k // 16, 16) * per_block.unsqueeze(-1)).view(n, k).numpy()


# ---------------------------------------------------------------- MXFP4


def mxfp4_quantize_torch(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """triton_kernels `_compute_quant_and_scale` (ROUND_UP) + dgjax's small-block / non-finite rules."""
    x = torch.from_numpy(np.ascontiguousarray(w, np.float32))
    n, k = x.shape
    blocks = x.view(n, k // 32, 32)
    amax = blocks.abs().amax(-1)
    d = torch.where(amax >= 2.0**-123, amax * torch.tensor(1 / 6, dtype=torch.float32), torch.zeros_like(amax))
    exp_bits = (d.view(torch.int32).to(torch.int64) + 0x007FFFFF) & 0x7F800000
    rounded = exp_bits.to(torch.int32).view(torch.float32)
    inv = torch.where(rounded == 0, torch.zeros_like(rounded), torch.tensor(1.0) / rounded)
    codes = modelopt_cast_fp4(blocks * inv.unsqueeze(-1)).view(n, k)
    scale = torch.where(torch.isfinite(amax), (exp_bits >> 23).to(torch.uint8), torch.tensor(255, dtype=torch.uint8))
    return torch_pack_pairs(codes).numpy(), scale.numpy()


def mxfp4_dequantize_transformers(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """transformers' gpt-oss decoder on the [N, K/32, 16] blocks view (it returns the transpose)."""
    from transformers.integrations.mxfp4 import _convert_moe_packed_tensors

    n, half = packed.shape
    blocks = torch.from_numpy(np.ascontiguousarray(packed).reshape(1, n, half // 16, 16))
    scales = torch.from_numpy(np.ascontiguousarray(scale).reshape(1, n, half // 16))
    return _convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)[0].T.contiguous().numpy()


# ---------------------------------------------------------------- compressed-tensors integers


def ct_pack_int32(q: np.ndarray, bits: int, packed_dim: int = 1) -> np.ndarray:
    """compressed-tensors `pack_to_int32`, element by element in Python ints."""
    per = 32 // bits
    q = np.asarray(q, np.int64)
    if packed_dim == 0:
        return ct_pack_int32(q.T, bits, 1).T.copy()
    n, k = q.shape
    out = np.zeros((n, -(-k // per)), np.int64)
    for r in range(n):
        for j in range(k):
            out[r, j // per] |= (int(q[r, j]) + (1 << (bits - 1))) << (bits * (j % per))
    return out.astype(np.uint32).view(np.int32)


def ct_unpack_int32_torch(words: np.ndarray, bits: int, size: int, packed_dim: int = 1) -> np.ndarray:
    """compressed-tensors `unpack_from_int32` (torch, shifts on int32 words)."""
    v = torch.from_numpy(np.ascontiguousarray(words))
    per, mask = 32 // bits, (1 << bits) - 1
    if packed_dim == 0:
        return ct_unpack_int32_torch(np.ascontiguousarray(words.T), bits, size, 1).T.copy()
    out = torch.zeros((v.shape[0], v.shape[1] * per), dtype=torch.int32)
    for i in range(per):
        out[:, i::per] = (v >> (bits * i)) & mask
    return (out[:, :size] - (1 << (bits - 1))).to(torch.int8).numpy()


def ct_quantize_torch(w: np.ndarray, bits: int, group: int, symmetric: bool, scale_dtype=torch.bfloat16):
    """compressed-tensors `calculate_qparams` + `_quantize` (min-max observer), per group, in torch."""
    x = torch.from_numpy(np.ascontiguousarray(w, np.float32))
    n, k = x.shape
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    g = x.view(n, k // group, group)
    lo = torch.clamp(g.amin(-1), max=0.0)
    hi = torch.clamp(g.amax(-1), min=0.0)
    eps = torch.finfo(torch.float32).eps
    if symmetric:
        scale = torch.clamp(torch.maximum(lo.abs(), hi) / ((qmax - qmin) / 2), min=eps)
    else:
        scale = torch.clamp((hi - lo) / (qmax - qmin), min=eps)
    scale = scale.to(scale_dtype)
    s32 = scale.to(torch.float32)
    zp = None if symmetric else torch.clamp(torch.round(qmin - lo / s32), qmin, qmax).to(torch.int8)
    shifted = g / s32.unsqueeze(-1) + (0 if zp is None else zp.to(torch.float32).unsqueeze(-1))
    q = torch.clamp(torch.round(shifted), qmin, qmax).to(torch.int8).view(n, k)
    return q.numpy(), scale, None if zp is None else zp.numpy()


def ct_dequantize_torch(q: np.ndarray, scale: torch.Tensor, zp, group: int) -> np.ndarray:
    x = torch.from_numpy(np.asarray(q)).to(torch.float32)
    n, k = x.shape
    if zp is not None:
        x = x - torch.from_numpy(np.asarray(zp)).to(torch.float32).repeat_interleave(group, -1)
    return (x * scale.to(torch.float32).repeat_interleave(group, -1)).numpy()
