"""Element codes: e2m1 rounding, nibble order, e8m0 and fp8 casts against independent references."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import torch
from quant_refs import bits, e2m1_code_bruteforce, edge_values, modelopt_cast_fp4

from dgjax.quant import codes

RNG = np.random.default_rng(0)


def _sample_values() -> np.ndarray:
    wide = (RNG.standard_normal(20000) * np.exp2(RNG.uniform(-4, 4, 20000))).astype(np.float32)
    return np.concatenate([edge_values(), wide])


def test_e2m1_encoding_is_nearest_ties_to_even_saturating():
    v = _sample_values()
    ours = codes.e2m1_encode_np(v)
    expected = np.array([e2m1_code_bruteforce(float(x)) for x in v], np.uint8)
    np.testing.assert_array_equal(ours, expected)
    # ml_dtypes' float4_e2m1fn cast rounds the same way (its bit pattern is the code).
    np.testing.assert_array_equal(ours, v.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF)
    # ModelOpt's searchsorted cast (with the sign taken from the sign bit) agrees too.
    np.testing.assert_array_equal(ours, modelopt_cast_fp4(torch.from_numpy(v)).numpy())


def test_e2m1_encoding_of_ties_negative_zero_and_nan():
    ties = np.float32([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 1e9, -0.25, -5.0, -0.0, 0.0, -0.1])
    got = codes.e2m1_encode_np(ties)
    np.testing.assert_array_equal(got, [0, 2, 2, 4, 4, 6, 6, 7, 7, 8, 14, 8, 0, 8])
    nan = codes.e2m1_encode_np(np.float32([np.nan, -np.nan]))
    assert set((nan & 7).tolist()) == {0}


def test_e2m1_jnp_twin_is_bit_identical():
    v = _sample_values()
    np.testing.assert_array_equal(np.asarray(jax.jit(codes.e2m1_encode)(v)), codes.e2m1_encode_np(v))
    all_codes = np.arange(16, dtype=np.uint8)
    np.testing.assert_array_equal(bits(np.asarray(codes.e2m1_decode(all_codes))), bits(codes.e2m1_decode_np(all_codes)))
    np.testing.assert_array_equal(bits(codes.e2m1_decode_np(all_codes)),
                                  bits(all_codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32)))


def test_nibble_order_is_low_nibble_first():
    c = RNG.integers(0, 16, size=(5, 34), dtype=np.uint8)
    packed = codes.pack_nibbles_np(c)
    for r in range(5):
        for i in range(17):
            assert packed[r, i] == c[r, 2 * i] + 16 * c[r, 2 * i + 1]
    np.testing.assert_array_equal(codes.unpack_nibbles_np(packed), c)
    np.testing.assert_array_equal(np.asarray(jax.jit(codes.pack_nibbles)(c)), packed)
    np.testing.assert_array_equal(np.asarray(jax.jit(codes.unpack_nibbles)(packed)), c)


def test_e8m0_decoding_matches_ml_dtypes_including_nan_and_subnormal():
    e = np.arange(256, dtype=np.uint8)
    ours = codes.e8m0_decode_np(e)
    np.testing.assert_array_equal(bits(ours), bits(e.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)))
    assert np.isnan(ours[255]) and ours[0] == np.float32(2.0**-127) and ours[127] == 1.0
    np.testing.assert_array_equal(bits(np.asarray(jax.jit(codes.e8m0_decode)(e))), bits(ours))


def test_fp8_cast_saturates_and_matches_torch():
    v = np.concatenate([_sample_values(), np.float32([np.inf, -np.inf, 1e38])])
    ours = codes.to_fp8_np(v)
    theirs = torch.from_numpy(v).to(torch.float8_e4m3fn).view(torch.uint8).numpy()  # torch saturates
    np.testing.assert_array_equal(ours.view(np.uint8), theirs)
    np.testing.assert_array_equal(np.asarray(jax.jit(codes.to_fp8)(v)).view(np.uint8), theirs)
    assert np.isnan(codes.to_fp8_np(np.float32([np.nan])).astype(np.float32)[0])
