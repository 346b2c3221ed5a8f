"""MXFP4 (gpt-oss blocks): decoder vs transformers' gpt-oss decoder, quantizer vs triton_kernels' algorithm."""

from __future__ import annotations

import jax
import numpy as np
from quant_refs import bits, edge_values, flush_subnormals, mxfp4_dequantize_transformers, mxfp4_quantize_torch

from dgjax.quant import mxfp4

RNG = np.random.default_rng(3)


def assert_same_floats(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(a)
    np.testing.assert_array_equal(bits(a)[ok], bits(b)[ok])


def test_dequantize_matches_transformers_gpt_oss_decoder_on_every_code_and_exponent():
    packed = RNG.integers(0, 256, size=(16, 128), dtype=np.uint8)  # K = 256, 8 blocks a row
    scale = (np.arange(16 * 8, dtype=np.uint8).reshape(16, 8) * 2 + 1) % 254  # exponents 0..253
    scale[0, :4] = [0, 127, 254, 255]  # subnormal 2**-127, 1, 2**127 (overflows to inf for 6), NaN
    ours = mxfp4.dequantize_np(packed, scale)
    theirs = mxfp4_dequantize_transformers(packed, scale)
    # OCP MX: exponent byte 255 is NaN; transformers' ldexp does not special-case it, so compare elsewhere.
    assert np.isnan(ours[0, 96:128]).all()
    ours_rest, theirs_rest = ours.copy(), theirs.copy()
    ours_rest[0, 96:128] = theirs_rest[0, 96:128] = 0
    assert_same_floats(ours_rest, theirs_rest)
    assert_same_floats(np.asarray(jax.jit(mxfp4.dequantize)(packed, scale)), flush_subnormals(ours))


def test_quantize_matches_triton_kernels_algorithm_and_jnp_twin():
    w = (RNG.standard_normal((24, 256)) * np.exp2(RNG.integers(-30, 30, (24, 8)).repeat(32, 1))).astype(np.float32)
    w[0, :32] = 0.0
    w[1, :32] = 1e-38  # below the 2**-123 floor
    w[2, :] = np.resize(edge_values()[np.abs(edge_values()) < 1e20], 256)
    w[3, :32] = 6.0 * 2.0**np.arange(-16, 16)  # block amax exactly 6 * 2**15: scale is not rounded up
    packed, scale = mxfp4.quantize_np(w)
    ref_packed, ref_scale = mxfp4_quantize_torch(w)
    np.testing.assert_array_equal(packed, ref_packed)
    np.testing.assert_array_equal(scale, ref_scale)
    assert scale[0, 0] == 0 and scale[1, 0] == 0 and not packed[:2, :16].any()
    assert scale[3, 0] == 127 + 15
    j_packed, j_scale = jax.jit(mxfp4.quantize)(w)
    np.testing.assert_array_equal(np.asarray(j_packed), packed)
    np.testing.assert_array_equal(np.asarray(j_scale), scale)


def test_round_trip_never_exceeds_block_range_and_nan_blocks_decode_nan():
    w = RNG.standard_normal((2, 8, 64)).astype(np.float32)
    w[1, 2, 40] = np.nan
    packed, scale = mxfp4.quantize_np(w)
    assert packed.shape == (2, 8, 32) and scale.shape == (2, 8, 2) and scale[1, 2, 1] == 255
    back = mxfp4.dequantize_np(packed, scale)
    nan_block = (1 * 8 + 2) * 2 + 1  # expert 1, row 2, block 1 among the [-1, 32] blocks
    assert np.isnan(back[1, 2, 32:]).all() and np.isfinite(np.delete(back.reshape(-1, 32), nan_block, 0)).all()
    ok = np.isfinite(back)
    step = np.repeat(mxfp4.codes.e8m0_decode_np(scale), 32, -1)
    assert np.all(np.abs(back - w)[ok] <= step[ok])  # e2m1 spacing <= 2 steps, so error <= 1 step
    amax = np.abs(np.where(np.isfinite(w), w, 0)).reshape(2, 8, 2, 32).max(-1)
    assert np.all(6.0 * mxfp4.codes.e8m0_decode_np(scale)[scale != 255] >= amax[scale != 255])  # no clipping
