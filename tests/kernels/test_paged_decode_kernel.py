"""The Pallas paged decode kernel (interpreted on CPU) against ref.py, and the api's dispatch rules.

Every page slot the kernel must not read holds NaN (the tail of each row's last page, table entries past
the context, pages no row references, the trash page); the reference runs on a copy where those slots
are finite, so any poisoned read shows up as a NaN or a mismatch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.paged_attention import api, kernel, ref

PAGE, TABLE = 8, 6  # a row's table holds 6 pages = 48 tokens
CONTEXTS = (1, PAGE - 1, PAGE, 3 * PAGE + 5, TABLE * PAGE, 0)  # the last row is padding
NUM_PAGES = 1 + len(CONTEXTS) * TABLE + 5  # trash page 0, every row's table, 5 unreferenced pages


def _case(seed: int, group: int, kv_heads: int, head_dim: int, dtype, q_scale: float = 1.0):
    """Random decode step: (q [B,1,H,D], poisoned pages, clean pages, tables, ctx, positions, query_lens)."""
    rng = np.random.default_rng(seed)
    b, h = len(CONTEXTS), kv_heads * group
    shape = (NUM_PAGES, PAGE, kv_heads, head_dim)
    clean_k = rng.standard_normal(shape).astype(np.float32)
    clean_v = rng.standard_normal(shape).astype(np.float32)
    live = np.zeros((NUM_PAGES, PAGE), bool)
    ids = rng.permutation(np.arange(1, NUM_PAGES))
    tables = ids[: b * TABLE].reshape(b, TABLE).astype(np.int32)  # shuffled, never contiguous
    for row, ctx in enumerate(CONTEXTS):
        for j in range(ctx):
            live[tables[row, j // PAGE], j % PAGE] = True
    tables[-1, 2:] = 0  # the padding row's table partly points at the trash page
    poison = ~live[:, :, None, None]
    k = np.where(poison, np.nan, clean_k)
    v = np.where(poison, np.nan, clean_v)
    q = (q_scale * rng.standard_normal((b, 1, h, head_dim))).astype(np.float32)
    ctx = np.array(CONTEXTS, np.int32)
    qlen = (ctx > 0).astype(np.int32)
    positions = np.where(ctx > 0, ctx - 1, 7)[:, None].astype(np.int32)
    cast = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    return (cast(q), cast(k), cast(v), cast(clean_k), cast(clean_v),
            jnp.asarray(tables), jnp.asarray(ctx), jnp.asarray(positions), jnp.asarray(qlen))


def _check(got, want, dtype):
    got = np.asarray(got.astype(jnp.float32))
    want = np.asarray(want.astype(jnp.float32))
    assert np.isfinite(got).all(), "poisoned or uninitialised data reached the output"
    if dtype == jnp.float32:
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())


CASES = [
    # group, kv_heads, head_dim, dtype, window, block_tokens, splits, q_scale
    (1, 2, 64, jnp.float32, None, 16, 1, 1.0),
    (4, 2, 128, jnp.float32, None, 16, 3, 1.0),
    (8, 1, 64, jnp.float32, 11, 16, 2, 1.0),
    (4, 2, 64, jnp.float32, 11, 32, 1, 1.0),
    (3, 2, 64, jnp.float32, None, 16, 2, 1.0),  # a group that is no power of two
    (4, 1, 128, jnp.float32, None, 16, 4, 30.0),  # peaked softmax: the running max must rescale
    (1, 2, 128, jnp.bfloat16, 9, 16, 3, 1.0),
    (4, 2, 128, jnp.bfloat16, None, None, None, 1.0),  # the default block and split choice
    (8, 1, 64, jnp.bfloat16, None, 16, 2, 1.0),
]


@pytest.mark.parametrize("group,kv_heads,head_dim,dtype,window,block_tokens,splits,q_scale", CASES)
def test_kernel_matches_reference_and_never_reads_poisoned_slots(
    group, kv_heads, head_dim, dtype, window, block_tokens, splits, q_scale
):
    q, k, v, clean_k, clean_v, tables, ctx, pos, qlen = _case(
        group * 100 + head_dim + (window or 0), group, kv_heads, head_dim, dtype, q_scale
    )
    scale = head_dim**-0.5
    want = ref.paged_attention(q, clean_k, clean_v, tables, ctx, pos, qlen, scale=scale, sliding_window=window)
    start, end = api.decode_window(ctx, pos, qlen, TABLE * PAGE, window)
    got = kernel.paged_decode_attention(
        q[:, 0], k, v, tables, start, end, scale=scale,
        block_tokens=block_tokens, num_splits=splits, interpret=True,
    )
    _check(got[:, None], want, dtype)
    np.testing.assert_array_equal(np.asarray(got[-1].astype(jnp.float32)), 0.0)  # the padding row


def test_api_kernel_path_matches_api_reference_path():
    q, k, v, clean_k, clean_v, tables, ctx, pos, qlen = _case(7, 4, 2, 64, jnp.float32)
    kw = dict(scale=64**-0.5, sliding_window=13)
    want = api.paged_attention(q, clean_k, clean_v, tables, ctx, pos, qlen, impl="ref", **kw)
    got = jax.jit(lambda *a: api.paged_attention(*a, impl="kernel", **kw))(q, k, v, tables, ctx, pos, qlen)
    _check(got, want, jnp.float32)


def _uses_kernel(fn, *args) -> bool:
    return "pallas_call" in str(jax.make_jaxpr(fn)(*args))


def test_dispatch_rules(monkeypatch):
    q, k, v, _, _, tables, ctx, pos, qlen = _case(3, 4, 2, 64, jnp.float32)
    args = (q, k, v, tables, ctx, pos, qlen)
    call = lambda impl: lambda *a: api.paged_attention(*a, scale=0.125, impl=impl)  # noqa: E731
    monkeypatch.delenv(api.ENV_VAR, raising=False)
    assert _uses_kernel(call("kernel"), *args)
    assert not _uses_kernel(call("ref"), *args)
    assert _uses_kernel(call("auto"), *args) == (jax.default_backend() == "gpu")
    monkeypatch.setenv(api.ENV_VAR, "kernel")
    assert _uses_kernel(call(None), *args)
    monkeypatch.setenv(api.ENV_VAR, "ref")
    assert not _uses_kernel(call(None), *args)
    # Prefill chunks (T > 1) take the prefill kernel when kernels are forced, the reference with "ref".
    q2 = jnp.concatenate([q, q], axis=1)
    pos2 = jnp.concatenate([pos, pos + 1], axis=1)
    assert _uses_kernel(call("kernel"), q2, k, v, tables, ctx, pos2, qlen)
    assert not _uses_kernel(call("ref"), q2, k, v, tables, ctx, pos2, qlen)
    monkeypatch.setenv(api.ENV_VAR, "fast")
    with pytest.raises(ValueError, match="attention impl"):
        api.paged_attention(*args, scale=0.125)


def test_forced_kernel_falls_back_loudly_for_an_unsupported_head_dim(caplog):
    q, _, _, k, v, tables, ctx, pos, qlen = _case(5, 2, 2, 48, jnp.float32)
    assert not kernel.supports(4, 2, 48, jnp.float32)
    call = lambda *a: api.paged_attention(*a, scale=0.1, impl="kernel")  # noqa: E731
    with caplog.at_level("WARNING", logger=api.__name__):
        assert not _uses_kernel(call, q, k, v, tables, ctx, pos, qlen)
    assert "does not support" in caplog.text


def test_default_splits_fill_the_gpu_but_never_exceed_the_blocks():
    h200 = 2 * 132
    assert kernel.default_num_splits(1, 8, 32768, 64, h200) * 8 >= 132  # one stream fills 132 SMs
    assert kernel.default_num_splits(16, 8, 32768, 64, h200) == 3
    assert kernel.default_num_splits(1, 8, 100, 64, h200) == 2  # no more splits than key blocks
    assert kernel.default_num_splits(64, 8, 32768, 64, h200) == 1


def test_supported_layouts():
    assert kernel.supports(32, 8, 128, jnp.bfloat16)
    assert kernel.supports(16, 2, 256, jnp.bfloat16)
    assert kernel.supports(96, 8, 128, jnp.float16)  # group 12, padded to 16 rows
    assert not kernel.supports(32, 8, 96, jnp.bfloat16)  # head_dim not a power of two
    assert not kernel.supports(64, 1, 128, jnp.bfloat16)  # group 64: beyond MAX_GROUP
    assert not kernel.supports(32, 8, 128, jnp.int8)
