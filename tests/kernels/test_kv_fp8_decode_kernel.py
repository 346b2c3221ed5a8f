"""The Pallas decode kernel (interpreted on CPU) on fp8 pages with per-(slot, kv head) scales, against ref.py
on the same fp8 pages. Slots the kernel must not read hold NaN (so their scales are NaN too)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_paged_decode_kernel import PAGE, TABLE, _case, _uses_kernel

from dgjax.pallas.paged_attention import api, kernel, ref


def _fp8(pages: jax.Array) -> ref.QuantizedPages:
    """Quantized pages; a poisoned (NaN) slot gets NaN values and a NaN scale."""
    values, scales = ref.quantize_fp8(pages)
    scales = jnp.where(jnp.isnan(pages).any(-1), jnp.nan, scales)
    return ref.QuantizedPages(values=values, scales=scales)


CASES = [
    # group, kv_heads, head_dim, q dtype, window, block_tokens, splits
    (1, 2, 64, jnp.float32, None, 16, 1),
    (4, 2, 128, jnp.float32, 11, 16, 3),
    (3, 2, 64, jnp.float32, None, 32, 2),
    (4, 2, 128, jnp.bfloat16, None, None, None),  # the default block and split choice
    (8, 1, 64, jnp.bfloat16, 9, 16, 2),
]


@pytest.mark.parametrize("group,kv_heads,head_dim,dtype,window,block_tokens,splits", CASES)
def test_kernel_on_fp8_pages_matches_reference_on_fp8_pages(
    group, kv_heads, head_dim, dtype, window, block_tokens, splits
):
    q, k, v, clean_k, clean_v, tables, ctx, pos, qlen = _case(
        group * 100 + head_dim + (window or 0), group, kv_heads, head_dim, jnp.float32, 4.0
    )
    q = q.astype(dtype)
    k8, v8, clean_k8, clean_v8 = (_fp8(x) for x in (k, v, clean_k, clean_v))
    assert np.isnan(np.asarray(k8.scales)).any() and np.isnan(np.asarray(k8.values.astype(jnp.float32))).any()
    scale = head_dim**-0.5
    want = ref.paged_attention(q, clean_k8, clean_v8, tables, ctx, pos, qlen, scale=scale, sliding_window=window)
    start, end = api.decode_window(ctx, pos, qlen, TABLE * PAGE, window)
    got = kernel.paged_decode_attention(
        q[:, 0], k8.values, v8.values, tables, start, end, k8.scales, v8.scales, scale=scale,
        block_tokens=block_tokens, num_splits=splits, interpret=True,
    )
    assert got.dtype == dtype
    got = np.asarray(got.astype(jnp.float32))
    want = np.asarray(want[:, 0].astype(jnp.float32))
    assert np.isfinite(got).all(), "poisoned or uninitialised data reached the output"
    if dtype == jnp.float32:
        np.testing.assert_allclose(got, want, atol=2e-5 * np.abs(want).max(), rtol=0)
    else:  # the kernel scales scores/probabilities, ref.py the pages: bf16 roundings differ
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())
    np.testing.assert_array_equal(got[-1], 0.0)  # the padding row


def test_api_routes_fp8_decode_to_the_kernel_and_matches_its_reference_path():
    q, k, v, clean_k, clean_v, tables, ctx, pos, qlen = _case(21, 4, 2, 64, jnp.float32)
    k8, v8 = _fp8(k), _fp8(v)
    kw = dict(scale=64**-0.5, sliding_window=13)
    call = lambda impl: lambda *a: api.paged_attention(*a, impl=impl, **kw)  # noqa: E731
    args = (q, k8, v8, tables, ctx, pos, qlen)
    assert _uses_kernel(call("kernel"), *args)
    assert not _uses_kernel(call("ref"), *args)
    want = api.paged_attention(q, _fp8(clean_k), _fp8(clean_v), tables, ctx, pos, qlen, impl="ref", **kw)
    got = jax.jit(call("kernel"))(*args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5 * float(jnp.abs(want).max()), rtol=0)


def test_kernel_requires_scales_exactly_for_fp8_pages():
    q, k, v, _, _, tables, ctx, pos, qlen = _case(1, 1, 2, 64, jnp.float32)
    start, end = api.decode_window(ctx, pos, qlen, TABLE * PAGE, None)
    k8 = _fp8(k)
    assert kernel.supports(8, 2, 64, jnp.float8_e4m3fn)
    with pytest.raises(ValueError, match="need k_scale"):
        kernel.paged_decode_attention(q[:, 0], k8.values, k8.values, tables, start, end, scale=0.1, interpret=True)
    with pytest.raises(ValueError, match="take no k_scale"):
        kernel.paged_decode_attention(q[:, 0], k, v, tables, start, end, k8.scales, k8.scales, scale=0.1,
                                      interpret=True)
    with pytest.raises(TypeError, match="both"):
        api.paged_attention(q, k8, v, tables, ctx, pos, qlen, scale=0.1)
