"""The residual add + RMSNorm kernel (interpret mode) against ref.py: plain and split-K deltas, biases, stacked
norm rows, widths that are not powers of two; its CUDA lowering; and the api's dispatch."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas import stacked
from dgjax.pallas.add_rms_norm import api, kernel, ref
from dgjax.pallas.split_sums import SplitSums


def _case(seed, rows, width, parts, dtype, bias=False, layers=3):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal((rows, width)), dtype)
    if parts:
        delta = SplitSums(jnp.asarray(rng.standard_normal((parts, rows, width)), jnp.float32), jnp.dtype(dtype),
                          jnp.asarray(rng.standard_normal(width), dtype) if bias else None)
    else:
        delta = jnp.asarray(rng.standard_normal((rows, width)), dtype)
    stack = jnp.asarray(1 + 0.3 * rng.standard_normal((layers, width)), dtype)
    return x, delta, stack


@pytest.mark.parametrize("rows,width,parts,dtype,bias", [
    (1, 64, 0, jnp.float32, False),
    (3, 96, 4, jnp.float32, True),     # width not a power of two, bias after the rounding
    (16, 128, 16, jnp.float32, False),  # the most rows, qwen3's 16 o-projection splits
    (2, 2048, 16, jnp.bfloat16, False),
    (5, 80, 1, jnp.bfloat16, True),
])
def test_kernel_matches_reference(rows, width, parts, dtype, bias):
    x, delta, stack = _case(rows * 7 + parts, rows, width, parts, dtype, bias)
    want_s, want_h = ref.add_rms_norm(x, delta, stack[1], 1e-6)
    got_s, got_h = kernel.add_rms_norm(x, delta, stack, 1, eps=1e-6, interpret=True)
    assert got_s.dtype == got_h.dtype == dtype and got_s.shape == got_h.shape == x.shape
    if dtype == jnp.float32:
        np.testing.assert_allclose(np.asarray(got_s), np.asarray(want_s), atol=1e-5, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(got_h), np.asarray(want_h), atol=1e-5, rtol=1e-5)
    else:  # partial sums in another order may round a bf16 value the other way: one ulp, rarely
        s_err = np.abs(np.asarray(got_s, np.float32) - np.asarray(want_s, np.float32))
        assert s_err.max() <= 2 ** -7 * np.abs(np.asarray(want_s, np.float32)).max() and (s_err > 0).mean() < 0.01
        np.testing.assert_allclose(np.asarray(got_h, np.float32), np.asarray(want_h, np.float32), atol=3e-2, rtol=2e-2)


def test_the_norm_row_is_read_in_place_and_matters():
    x, delta, stack = _case(1, 2, 64, 4, jnp.float32)
    rows = [kernel.add_rms_norm(x, delta, stack, r, eps=1e-6, interpret=True)[1] for r in (0, 2)]
    for r, got in zip((0, 2), rows):
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref.add_rms_norm(x, delta, stack[r], 1e-6)[1]),
                                   atol=1e-5, rtol=1e-5)
    assert not np.allclose(np.asarray(rows[0]), np.asarray(rows[1]), atol=1e-3)


@pytest.mark.parametrize("impl", ["kernel", "ref"])
def test_api_takes_leading_dims_split_sums_and_stacked_rows(impl):
    """Through the api as the decoder calls it: x [B, 1, E], the o projection's SplitSums [S, B, 1, E], the
    norm as a StackedRow; kernel and reference agree."""
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.standard_normal((3, 1, 64)), jnp.float32)
    delta = SplitSums(jnp.asarray(rng.standard_normal((4, 3, 1, 64)), jnp.float32), jnp.dtype(jnp.float32),
                      jnp.asarray(rng.standard_normal(64), jnp.float32))
    stack = jnp.asarray(1 + 0.3 * rng.standard_normal((5, 64)), jnp.float32)
    got_s, got_h = api.add_rms_norm(x, delta, stacked.StackedRow(stack, 3), 1e-5, impl=impl)
    want_s = x + delta.value()
    xf = np.asarray(want_s, np.float64)
    want_h = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-5) * np.asarray(stack[3])
    assert got_s.shape == got_h.shape == x.shape
    np.testing.assert_allclose(np.asarray(got_s), np.asarray(want_s), atol=1e-5, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got_h), want_h, atol=1e-4, rtol=1e-4)


def test_dispatch_rules(monkeypatch):
    x = jnp.zeros((1, 1, 2048), jnp.bfloat16)
    monkeypatch.delenv(api.ENV_VAR, raising=False)
    assert not api.use_kernel(x, splits=True)  # auto: the kernel on a GPU only (this is the CPU)
    assert api.use_kernel(x, splits=False, impl="kernel") and not api.use_kernel(x, splits=True, impl="ref")
    assert not api.use_kernel(jnp.zeros((2, 2048, 64)), splits=True, impl="kernel")  # a prefill chunk: too many rows
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert not api.use_kernel(x, splits=True)  # slower than XLA's fusions on the H200: opt-in
    monkeypatch.setattr(api, "GPU_PREFERRED", True)
    assert api.use_kernel(x, splits=True) and not api.use_kernel(x, splits=False)  # plain adds stay with XLA
    monkeypatch.setenv(api.ENV_VAR, "ref")
    assert not api.use_kernel(x, splits=True)
    monkeypatch.setenv(api.ENV_VAR, "bogus")
    with pytest.raises(ValueError, match="DGJAX_ADD_NORM"):
        api.use_kernel(x, splits=True)


def test_lowers_to_one_valid_triton_kernel_for_every_layer(verified_triton_lowering):
    """qwen3-30b-a3b's decode shape (1 row, 2048 wide, 16 splits, a 48-row norm stack): valid Triton, and two
    layers' rows lower to the very same kernel (the row is a runtime argument)."""
    spec = jax.ShapeDtypeStruct
    x = spec((1, 2048), jnp.bfloat16)
    delta = SplitSums(spec((16, 1, 2048), jnp.float32), jnp.dtype(jnp.bfloat16))
    stack = spec((48, 2048), jnp.bfloat16)

    def two_layers(x, delta, stack):
        s, h = kernel.add_rms_norm(x, delta, stack, 3, eps=1e-6)
        return kernel.add_rms_norm(s, delta, stack, 47, eps=1e-6)[1] + h

    text = jax.jit(two_layers).trace(x, delta, stack).lower(lowering_platforms=("cuda",)).as_text()
    assert verified_triton_lowering and all(verified_triton_lowering)  # the second call reuses the first's
    kernels = set(re.findall(r'custom_call @__gpu\$xla\.gpu\.triton\(.*? ir = "(.*?)", ', text))
    assert len(kernels) == 1 and "add_rms_norm_s16_e2048" in text


def test_warps_switch_sets_the_launch_and_keeps_the_result(monkeypatch):
    """DGJAX_ADD_NORM_WARPS reaches the kernel (its name carries the warps) without changing the sums; bad values
    are refused naming the variable."""
    x, delta, stack = _case(7, 2, 2048, 16, jnp.bfloat16)
    monkeypatch.setenv(api.WARPS_ENV_VAR, "16")
    got_s, got_h = api.add_rms_norm(x, delta, stacked.StackedRow(stack, 1), 1e-6, impl="kernel")
    want_s, want_h = ref.add_rms_norm(x, delta, stacked.StackedRow(stack, 1), 1e-6)
    np.testing.assert_array_equal(np.asarray(got_s, np.float32), np.asarray(want_s, np.float32))
    np.testing.assert_allclose(np.asarray(got_h, np.float32), np.asarray(want_h, np.float32), atol=2e-2, rtol=1e-2)
    spec = jax.ShapeDtypeStruct
    text = jax.jit(lambda a, d, w: kernel.add_rms_norm(a, d, w, 0, eps=1e-6, num_warps=16)).trace(
        spec((2, 2048), jnp.bfloat16), SplitSums(spec((16, 2, 2048), jnp.float32), jnp.dtype(jnp.bfloat16)),
        spec((3, 2048), jnp.bfloat16)).lower(lowering_platforms=("cuda",)).as_text()
    assert "add_rms_norm_s16_e2048_w16" in text and "num_warps = 16" in text
    for bad in ("3", "0", "many"):
        monkeypatch.setenv(api.WARPS_ENV_VAR, bad)
        with pytest.raises(ValueError, match="DGJAX_ADD_NORM_WARPS"):
            api.add_rms_norm(x, delta, stacked.StackedRow(stack, 1), 1e-6, impl="kernel")
