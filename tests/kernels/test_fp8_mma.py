"""dgjax/pallas/fp8_mma: Pallas' fp8 x fp8 dots lowered for CUDA carry maxNumImpreciseAcc = K (what lets
Triton issue Hopper's e4m3 wgmma instead of converting both tiles to f16); other dots are left alone, and
the interpreted product is unchanged; `fp8_block.round_activations` (the a8 dot's reference rounding)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas import fp8_mma
from dgjax.quant import fp8_block
from triton_text import cuda_triton_modules  # tests/kernels is on sys.path


def _dot_kernel(a_ref, b_ref, o_ref):
    o_ref[...] = plgpu.dot(a_ref[...], b_ref[...], trans_b=True)


def _call(m, n, interpret=False):
    return pl.pallas_call(_dot_kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32), interpret=interpret,
                          compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1))  # Triton, not Mosaic


def _ttir_dots(dtype, m=128, n=16, k=64) -> list[str]:
    """The tt.dot lines of the Triton module a [m, k] x [n, k]^T dot in `dtype` lowers to for CUDA."""
    spec = jax.ShapeDtypeStruct
    texts = cuda_triton_modules(_call(m, n), spec((m, k), dtype), spec((n, k), dtype))
    return [line for text in texts for line in text.splitlines() if "tt.dot" in line]


def test_fp8_dots_carry_their_k_as_imprecise_accumulation_and_others_do_not():
    assert fp8_mma.install() and fp8_mma.install()  # idempotent
    (fp8_dot,) = _ttir_dots(jnp.float8_e4m3fn, k=64)
    assert re.search(r"maxNumImpreciseAcc = 64 : i32", fp8_dot) and "xf8E4M3FN" in fp8_dot
    (k128,) = _ttir_dots(jnp.float8_e4m3fn, k=128)
    assert "maxNumImpreciseAcc = 128" in k128
    (bf16_dot,) = _ttir_dots(jnp.bfloat16)
    assert "maxNumImpreciseAcc" not in bf16_dot


def test_interpreted_fp8_dot_is_the_exact_product():
    fp8_mma.install()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 32)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((16, 32)).astype(ml_dtypes.float8_e4m3fn)
    got = np.asarray(_call(64, 16, interpret=True)(jnp.asarray(a), jnp.asarray(b)))
    np.testing.assert_array_equal(got, a.astype(np.float64) @ b.astype(np.float64).T)  # small sums: exact


@pytest.mark.parametrize("magnitude", [1e-30, 1.0, 3e4, 1e30])
def test_round_activations_scales_each_group_and_rounds_as_e4m3(magnitude):
    """Each row's group of inputs: largest |value| scaled into [128, 256), rounded to nearest e4m3 (numpy's
    ml_dtypes is the independent rounding), scaled back; groups of another scale and zero groups in the
    same row keep their own scales."""
    rng = np.random.default_rng(1)
    x = (magnitude * rng.standard_normal((3, 96))).astype(np.float32)
    x[1, 32:64] *= 1e-3
    x[2, 64:] = 0.0
    x = np.asarray(jnp.asarray(x, jnp.bfloat16), np.float32)  # what the kernels' bf16 rows hold
    got = np.asarray(fp8_block.round_activations(jnp.asarray(x, jnp.bfloat16), 32), np.float32)
    for r in range(3):
        for g in range(3):
            v = x[r, 32 * g:32 * (g + 1)]
            amax = np.abs(v).max()
            if amax == 0:
                assert not got[r, 32 * g:32 * (g + 1)].any()
                continue
            scale = np.float32(2.0 ** (np.floor(np.log2(amax)) - fp8_block.ACT_MAX_EXP))
            assert 128 <= amax / scale < 256
            want = (v / scale).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * scale
            np.testing.assert_array_equal(got[r, 32 * g:32 * (g + 1)], want)
    assert np.abs(got - x).max() <= np.abs(x).max() * 2.0**-4  # rounding changed values, within e4m3's step
    assert (got != x).any()


@pytest.mark.parametrize("magnitude", [1e-30, 1.0, 3e4, 1e30])
def test_two_term_round_activations_keeps_about_bf16_precision(magnitude):
    """terms=2 (DGJAX_FP8_DOT=a8x2): the one-term e4m3 value plus its residual, times 2**5, rounded to e4m3
    again (ml_dtypes' rounding, independent of jnp's) and divided back, in float32. Every value then lies
    within 2**-9 of its group's largest |value| (half an e4m3 step of a residual up to 2**8, over 2**5 and a
    largest value of at least 2**7), the worst error at least 16x below one term's, and most bf16 values
    come back exactly."""
    rng = np.random.default_rng(2)
    x = (magnitude * rng.standard_normal((3, 96))).astype(np.float32)
    x[1, 32:64] *= 1e-3
    x[2, 64:] = 0.0
    x = np.asarray(jnp.asarray(x, jnp.bfloat16), np.float32)
    got = np.asarray(fp8_block.round_activations(jnp.asarray(x, jnp.bfloat16), 32, terms=2))
    one = np.asarray(fp8_block.round_activations(jnp.asarray(x, jnp.bfloat16), 32), np.float32)
    assert got.dtype == np.float32
    e4m3 = lambda v: v.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)  # noqa: E731
    up = np.float32(2.0 ** fp8_block.ACT_RESIDUAL_EXP)
    for r in range(3):
        for g in range(3):
            v, out = x[r, 32 * g:32 * (g + 1)], got[r, 32 * g:32 * (g + 1)]
            amax = np.abs(v).max()
            if amax == 0:
                assert not out.any()
                continue
            scale = np.float32(2.0 ** (np.floor(np.log2(amax)) - fp8_block.ACT_MAX_EXP))
            hi = e4m3(v / scale)
            np.testing.assert_array_equal(out, (hi + e4m3((v / scale - hi) * up) / up) * scale)
            assert np.abs(out - v).max() <= amax * 2.0**-9
    err_one, err_two = np.abs(one - x).max(), np.abs(got - x).max()
    assert err_one > 0 and err_two * 16 <= err_one
    assert (got == x).mean() > 0.5  # most bf16 values are held exactly


def test_round_activations_rejects_other_term_counts():
    with pytest.raises(ValueError, match="terms"):
        fp8_block.round_activations(jnp.ones((1, 32), jnp.bfloat16), 32, terms=3)
