"""FP8 block-128 weights: decoder vs transformers', quantizer vs a per-tile torch computation, jnp twins."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
from quant_refs import bits, edge_values, flush_subnormals, fp8_block_dequantize_transformers, fp8_block_quantize_torch

from dgjax.quant import fp8_block

RNG = np.random.default_rng(1)
N, K = 200, 320  # 2 x 3 tiles of 128, the last row and column of tiles partial


def assert_same_floats(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(a)
    np.testing.assert_array_equal(bits(a)[ok], bits(b)[ok])


def _weights() -> np.ndarray:
    """Tiles of different magnitudes, plus zero / tiny / edge-value / max tiles."""
    w = RNG.standard_normal((N, K)).astype(np.float32) * np.exp2(RNG.integers(-12, 12, (2, 1, 3, 1)).repeat(128, 1)
                                                                 .repeat(128, 3).reshape(256, 384)[:N, :K])
    w[:128, :128] = 0.0  # all-zero tile
    w[:128, 128:256] = RNG.standard_normal((128, 128)) * 1e-37  # below the 2**-117 floor
    e = edge_values()
    w[128:, 128:256].flat[: len(e)] = e[: 72 * 128]  # grid points, ties, fp8 max / overflow
    w[128:, 256:] = 448.0 * np.sign(RNG.standard_normal((72, 64)))  # max-value tile
    return w


def test_dequantize_matches_transformers_on_every_code_and_partial_tiles():
    values = RNG.integers(0, 256, size=(N, K), dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    scale = np.exp2(RNG.uniform(-20, 20, size=(2, 3))).astype(np.float32)
    ours = fp8_block.dequantize_np(values, scale)
    assert_same_floats(ours, fp8_block_dequantize_transformers(values, scale))
    assert_same_floats(np.asarray(jax.jit(fp8_block.dequantize)(values, scale)), flush_subnormals(ours))


def test_quantize_matches_per_tile_reference_and_jnp_twin():
    w = _weights()
    values, scale = fp8_block.quantize_np(w)
    ref_values, ref_scale = fp8_block_quantize_torch(w)
    np.testing.assert_array_equal(values.view(np.uint8), ref_values.view(np.uint8))
    assert_same_floats(scale, ref_scale)
    assert scale[0, 0] == 1.0 and scale[0, 1] == 1.0 and not values[:128, :256].astype(np.float32).any()
    assert np.all(np.abs(values[128:, 256:].astype(np.float32)) == 448.0)
    j_values, j_scale = jax.jit(fp8_block.quantize)(w)
    np.testing.assert_array_equal(np.asarray(j_values).view(np.uint8), values.view(np.uint8))
    assert_same_floats(np.asarray(j_scale), scale)


def test_round_trip_error_is_within_half_an_fp8_step():
    w = RNG.standard_normal((3, 130, 260)).astype(np.float32)  # expert-stacked
    values, scale = fp8_block.quantize_np(w)
    assert values.shape == w.shape and scale.shape == (3, 2, 3)
    back = fp8_block.dequantize_np(values, scale)
    step = np.maximum(np.abs(w) * 2.0**-4, 2.0**-9 * np.repeat(np.repeat(scale, 128, 1), 128, 2)[:, :130, :260])
    assert np.all(np.abs(back - w) <= step)
    for e in range(3):
        v_e, s_e = fp8_block.quantize_np(w[e])
        np.testing.assert_array_equal(v_e.view(np.uint8), values[e].view(np.uint8))


def test_non_finite_tiles_decode_to_nan_never_to_finite_values():
    w = RNG.standard_normal((256, 256)).astype(np.float32)
    w[3, 5], w[200, 130] = np.nan, -np.inf
    values, scale = fp8_block.quantize_np(w)
    assert np.isnan(scale[0, 0]) and np.isnan(scale[1, 1]) and np.isfinite(scale[0, 1]) and np.isfinite(scale[1, 0])
    back = fp8_block.dequantize_np(values, scale)
    assert np.isnan(back[:128, :128]).all() and np.isnan(back[128:, 128:]).all() and np.isfinite(back[:128, 128:]).all()
    j_values, j_scale = jax.jit(fp8_block.quantize)(w)
    assert_same_floats(np.asarray(j_scale), scale)
    np.testing.assert_array_equal(np.asarray(j_values).view(np.uint8), values.view(np.uint8))


def test_float32_subnormal_inputs_quantize_as_xla_cpu_flushes_them():
    w = RNG.standard_normal((128, 128)).astype(np.float32) * 1e-3
    w[0, :64] = np.float32(3e-39) * np.sign(RNG.standard_normal(64))
    j_values, j_scale = jax.jit(fp8_block.quantize)(w)
    values, scale = fp8_block.quantize_np(flush_subnormals(w))
    np.testing.assert_array_equal(np.asarray(j_values).view(np.uint8), values.view(np.uint8))
    assert_same_floats(np.asarray(j_scale), scale)
