"""int4/int8 group weights (compressed-tensors): packing, quantizer and decoder vs compressed-tensors' algorithms."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest
import torch
from quant_refs import bits, ct_dequantize_torch, ct_pack_int32, ct_quantize_torch, ct_unpack_int32_torch

from dgjax.quant import int_group

RNG = np.random.default_rng(4)


@pytest.mark.parametrize("nbits", [4, 8])
def test_int32_packing_matches_compressed_tensors_along_both_dims(nbits):
    lo, hi = int_group.q_range(nbits)
    q = RNG.integers(lo, hi + 1, size=(13, 21), dtype=np.int8)  # 21 and 13: padded words on both dims
    for dim in (1, 0):
        words = int_group.pack_int32_np(q, nbits, axis=dim - 2)
        np.testing.assert_array_equal(words, ct_pack_int32(q, nbits, packed_dim=dim))
        size = q.shape[dim]
        np.testing.assert_array_equal(int_group.unpack_int32_np(words, nbits, size, axis=dim - 2), q)
        np.testing.assert_array_equal(ct_unpack_int32_torch(words, nbits, size, packed_dim=dim), q)


@pytest.mark.parametrize("nbits", [4, 8])
def test_device_values_are_the_checkpoint_words_bytes(nbits):
    lo, hi = int_group.q_range(nbits)
    q = RNG.integers(lo, hi + 1, size=(6, 40), dtype=np.int8)
    words = ct_pack_int32(q, nbits)
    values = int_group.device_values_np(words, nbits, 40)
    np.testing.assert_array_equal(values, int_group.values_from_q_np(q, nbits))
    np.testing.assert_array_equal(int_group.q_from_values_np(values, nbits), q)
    if nbits == 4:  # element 2i in the low nibble of byte i, stored as q + 8
        assert values.dtype == np.uint8 and values.shape == (6, 20)
        qi = q.astype(int).tolist()
        assert all(values[r, i] == (qi[r][2 * i] + 8) + 16 * (qi[r][2 * i + 1] + 8)
                   for r in range(6) for i in range(20))
    else:
        assert values.dtype == np.int8 and values.shape == (6, 40)


def _weights() -> np.ndarray:
    w = RNG.standard_normal((12, 256)).astype(np.float32) * np.float32(0.05)
    w[0, :64] = 0.0  # all-zero group
    w[1, :64] = 0.3  # constant positive group (asymmetric: zero point at qmin)
    w[2, :64] = np.linspace(-1, 3, 64)
    w[3, :64] = np.float32(65504.0) * np.sign(RNG.standard_normal(64))  # large values
    return w


@pytest.mark.parametrize("nbits,group,symmetric", [(4, 64, True), (4, 32, False), (8, 128, True), (8, 256, False)])
def test_quantizer_and_decoder_match_compressed_tensors(nbits, group, symmetric):
    w = _weights()
    q, scale, zp = int_group.quantize_np(w, nbits, group, symmetric)
    ref_q, ref_scale, ref_zp = ct_quantize_torch(w, nbits, group, symmetric)
    np.testing.assert_array_equal(q, ref_q)
    np.testing.assert_array_equal(bits(scale), ref_scale.view(torch.int16).numpy().view(np.uint16))
    assert scale.dtype == ml_dtypes.bfloat16
    if symmetric:
        assert zp is None
    else:
        np.testing.assert_array_equal(zp, ref_zp)
    ours = int_group.dequantize_np(q, scale, zp, group)
    np.testing.assert_array_equal(bits(ours), bits(ct_dequantize_torch(q, ref_scale, ref_zp, group)))
    values = int_group.values_from_q_np(q, nbits)
    jnp_out = jax.jit(int_group.dequantize, static_argnums=(3, 4))(values, scale, zp, nbits, group)
    np.testing.assert_array_equal(bits(np.asarray(jnp_out)), bits(ours))
    # Half a step inside the range; up to one step at its clipped ends (7.5 steps for a symmetric max,
    # a rounded zero point for asymmetric groups).
    step = np.repeat(scale.astype(np.float32), group, -1)
    assert np.all(np.abs(ours - w) <= step * (1 + 2.0**-7))
    assert np.mean(np.abs(ours - w) <= step * 0.5 * (1 + 2.0**-7)) > 0.95


def test_quantizer_rejects_non_finite_weights():
    with pytest.raises(ValueError, match="non-finite"):
        int_group.quantize_np(np.float32([[1.0, np.nan]]), 4, 2)
