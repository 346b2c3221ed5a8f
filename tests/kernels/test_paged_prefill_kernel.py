"""The Pallas paged prefill kernel (interpreted on CPU) against ref.py on chunks of T > 1 queries.

Rows: a first chunk (start 0), a later chunk whose earlier keys sit in the cache (start 13, not a page
multiple), a short chunk padded to T (query_lens < T), and an all-padding row whose table partly points at
the trash page. Every page slot at or past a row's context, every unreferenced page and the trash page hold
NaN; the reference runs on a finite copy, so a poisoned read shows up as a NaN or a mismatch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.paged_attention import api as paged_api
from dgjax.pallas.paged_attention import ref
from dgjax.pallas.paged_prefill import api

PAGE, TABLE, T = 8, 6, 20  # a row's table holds 6 pages = 48 tokens; chunks of 20 queries
STARTS = (0, 13, 5, 0)  # first position of each row's chunk
QUERY_LENS = (T, T, 3, 0)  # row 2 is padded to T, row 3 is all padding
NUM_PAGES = 1 + len(STARTS) * TABLE + 5  # trash page 0, every row's table, 5 unreferenced pages


def _case(seed: int, group: int, kv_heads: int, head_dim: int, dtype, q_scale: float = 1.0):
    """(q [B,T,H,D], poisoned k, v, clean k, v, tables, context_lens, positions, query_lens)."""
    rng = np.random.default_rng(seed)
    b, h = len(STARTS), kv_heads * group
    shape = (NUM_PAGES, PAGE, kv_heads, head_dim)
    clean_k = rng.standard_normal(shape).astype(np.float32)
    clean_v = rng.standard_normal(shape).astype(np.float32)
    ctx = np.array(STARTS, np.int32) + np.array(QUERY_LENS, np.int32)
    ids = rng.permutation(np.arange(1, NUM_PAGES))
    tables = ids[: b * TABLE].reshape(b, TABLE).astype(np.int32)  # shuffled, never contiguous
    tables[-1, 2:] = 0  # the padding row's table partly points at the trash page
    live = np.zeros((NUM_PAGES, PAGE), bool)
    for row, n in enumerate(ctx):
        for j in range(n):
            live[tables[row, j // PAGE], j % PAGE] = True
    poison = ~live[:, :, None, None]
    k = np.where(poison, np.nan, clean_k)
    v = np.where(poison, np.nan, clean_v)
    q = (q_scale * rng.standard_normal((b, T, h, head_dim))).astype(np.float32)
    # Padding queries carry positions past the context: the kernel must ignore them.
    positions = (np.array(STARTS)[:, None] + np.arange(T)[None, :]).astype(np.int32)
    cast = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    return (cast(q), cast(k), cast(v), cast(clean_k), cast(clean_v), jnp.asarray(tables), jnp.asarray(ctx),
            jnp.asarray(positions), jnp.asarray(QUERY_LENS, jnp.int32))


def _check(got, want, dtype):
    got = np.asarray(got.astype(jnp.float32))
    want = np.asarray(want.astype(jnp.float32))
    assert got.shape == want.shape
    assert np.isfinite(got).all(), "poisoned or uninitialised data reached the output"
    if dtype == jnp.float32:
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())
    np.testing.assert_array_equal(got[2, QUERY_LENS[2]:], 0.0)  # padding queries
    np.testing.assert_array_equal(got[3], 0.0)  # the all-padding row


CASES = [
    # group, kv_heads, head_dim, dtype, window, block_m, block_k, q_scale
    (1, 2, 64, jnp.float32, None, 16, 16, 1.0),
    (4, 2, 128, jnp.float32, None, 32, 16, 1.0),
    (4, 2, 64, jnp.float32, 11, 32, 16, 1.0),  # window shorter than the chunk
    (1, 2, 128, jnp.float32, 7, 16, 32, 1.0),
    (3, 2, 64, jnp.float32, None, 16, 16, 1.0),  # a group that is no power of two (padded to 4)
    (4, 1, 64, jnp.float32, None, 64, 16, 10.0),  # peaked softmax (scores span ~100): the running max must rescale
    (4, 2, 128, jnp.bfloat16, None, None, 64, 1.0),  # the default query block
    (1, 2, 64, jnp.bfloat16, 9, 16, 16, 1.0),
]


@pytest.mark.parametrize("group,kv_heads,head_dim,dtype,window,block_m,block_k,q_scale", CASES)
def test_kernel_matches_reference_and_never_reads_poisoned_slots(
    group, kv_heads, head_dim, dtype, window, block_m, block_k, q_scale
):
    q, k, v, clean_k, clean_v, tables, ctx, pos, qlen = _case(
        group * 100 + head_dim + (window or 0), group, kv_heads, head_dim, dtype, q_scale
    )
    scale = head_dim**-0.5
    want = ref.paged_attention(q, clean_k, clean_v, tables, ctx, pos, qlen, scale=scale, sliding_window=window)
    got = api.paged_prefill_attention(
        q, k, v, tables, ctx, pos, qlen, scale=scale, sliding_window=window, interpret=True,
        block_m=block_m, block_k=block_k,
    )
    _check(got, want, dtype)


def test_fp8_pages_match_the_reference_dequantization():
    q, k, v, clean_k, clean_v, tables, ctx, pos, qlen = _case(11, 4, 2, 64, jnp.bfloat16)

    def quantized(poisoned, clean):
        values, scales = ref.quantize_fp8(clean)
        nan = jnp.isnan(poisoned[..., 0])
        return (ref.QuantizedPages(values, scales),
                ref.QuantizedPages(jnp.where(nan[..., None], jnp.nan, values).astype(values.dtype),
                                   jnp.where(nan, jnp.nan, scales)))

    clean_kq, kq = quantized(k, clean_k)
    clean_vq, vq = quantized(v, clean_v)
    kw = dict(scale=0.125, sliding_window=None)
    want = ref.paged_attention(q, clean_kq, clean_vq, tables, ctx, pos, qlen, **kw)
    got = api.paged_prefill_attention(q, kq, vq, tables, ctx, pos, qlen, interpret=True, block_m=32, block_k=16, **kw)
    _check(got, want, jnp.bfloat16)


def test_jitted_kernel_matches_the_dispatchers_reference_path():
    q, k, v, clean_k, clean_v, tables, ctx, pos, qlen = _case(7, 2, 2, 64, jnp.float32)
    kw = dict(scale=64**-0.5, sliding_window=13)
    want = paged_api.paged_attention(q, clean_k, clean_v, tables, ctx, pos, qlen, impl="ref", **kw)
    got = jax.jit(lambda *a: api.paged_prefill_attention(*a, interpret=True, **kw))(q, k, v, tables, ctx, pos, qlen)
    _check(got, want, jnp.float32)


def test_supported_layouts():
    assert api.supports(32, 8, 128, jnp.bfloat16)
    assert api.supports(96, 8, 128, jnp.bfloat16)  # group 12, padded to 16
    assert api.supports(32, 8, 128, ref.FP8_DTYPE, ref.FP8_DTYPE)
    assert not api.supports(32, 8, 128, jnp.bfloat16, jnp.float16)  # K and V dtypes differ
    assert not api.supports(32, 8, 96, jnp.bfloat16)  # head_dim not a power of two
    assert not api.supports(64, 1, 128, jnp.bfloat16)  # group 64: beyond MAX_GROUP
    assert not api.supports(32, 8, 128, jnp.int8)
