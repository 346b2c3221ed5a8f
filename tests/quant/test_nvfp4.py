"""NVFP4 (ModelOpt layout): decoder and quantizer vs torch re-implementations of ModelOpt's, jnp twins."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
from quant_refs import bits, edge_values, flush_subnormals, nvfp4_dequantize_torch, nvfp4_quantize_torch

from dgjax.quant import nvfp4

RNG = np.random.default_rng(2)


def assert_same_floats(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(a)
    np.testing.assert_array_equal(bits(a)[ok], bits(b)[ok])


def _weights() -> np.ndarray:
    w = (RNG.standard_normal((48, 256)) * np.exp2(RNG.integers(-8, 8, (48, 16)).repeat(16, 1))).astype(np.float32)
    w[0, :16] = 0.0  # zero block -> scale 1
    w[1, :16] = 1e-9  # block whose fp8 scale underflows to 0
    w[2, :] = np.resize(edge_values()[np.abs(edge_values()) < 1e20], 256)
    w[3, :16] = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -6, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5.0]
    return w


def test_dequantize_matches_modelopt_on_every_code_and_scale():
    packed = RNG.integers(0, 256, size=(40, 64), dtype=np.uint8)  # K = 128
    block_scale = RNG.integers(0, 256, size=(40, 8), dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    glob = np.float32(3.7e-3)
    ours = nvfp4.dequantize_np(packed, block_scale, glob)
    assert_same_floats(ours, nvfp4_dequantize_torch(packed, block_scale, glob))
    assert_same_floats(np.asarray(jax.jit(nvfp4.dequantize)(packed, block_scale, glob)), flush_subnormals(ours))


def test_quantize_matches_modelopt_algorithm_and_jnp_twin():
    w = _weights()
    packed, bscale, glob = nvfp4.quantize_np(w)
    ref_packed, ref_bscale, ref_glob = nvfp4_quantize_torch(w)
    np.testing.assert_array_equal(packed, ref_packed)
    np.testing.assert_array_equal(bscale.view(np.uint8), ref_bscale.view(np.uint8))
    assert bits(glob) == bits(ref_glob) and glob.shape == ()
    assert bscale[0, 0].astype(np.float32) == 1.0 and not packed[0, :8].any()
    assert bscale[1, 0].astype(np.float32) == 0.0 and not packed[1, :8].any()
    j = jax.jit(nvfp4.quantize)(w)
    np.testing.assert_array_equal(np.asarray(j[0]), packed)
    np.testing.assert_array_equal(np.asarray(j[1]).view(np.uint8), bscale.view(np.uint8))
    assert_same_floats(np.asarray(j[2]), glob)


def test_round_trip_error_and_expert_stacks():
    w = RNG.standard_normal((3, 24, 64)).astype(np.float32)
    packed, bscale, glob = nvfp4.quantize_np(w)
    assert packed.shape == (3, 24, 32) and bscale.shape == (3, 24, 4) and glob.shape == (3,)
    back = nvfp4.dequantize_np(packed, bscale, glob)
    step = np.repeat(bscale.astype(np.float32), 16, -1) * glob[:, None, None]
    # e2m1 spacing is at most 2 (between 4 and 6) in units of the block step; fp8 scale rounding adds 1/16.
    assert np.all(np.abs(back - w) <= step * 1.0 + np.abs(w) * 2.0**-4)
    for e in range(3):
        p_e, s_e, g_e = nvfp4.quantize_np(w[e])
        np.testing.assert_array_equal(p_e, packed[e])
        assert g_e == glob[e]


def test_non_finite_and_all_zero_tensors():
    w = RNG.standard_normal((16, 32)).astype(np.float32)
    w[4, 4] = np.inf
    packed, bscale, glob = nvfp4.quantize_np(w)
    assert np.isnan(glob) and np.isnan(nvfp4.dequantize_np(packed, bscale, glob)).all()
    assert_same_floats(np.asarray(jax.jit(nvfp4.quantize)(w)[2]), glob)
    packed, bscale, glob = nvfp4.quantize_np(np.zeros((16, 32), np.float32))
    assert glob == 1.0 and not packed.any()
    assert not nvfp4.dequantize_np(packed, bscale, glob).any()


def test_k_must_be_a_multiple_of_16():
    try:
        nvfp4.quantize_np(np.ones((4, 24), np.float32))
    except ValueError as e:
        assert "multiple of 16" in str(e)
    else:
        raise AssertionError("K=24 was accepted")
