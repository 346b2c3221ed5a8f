"""The paged-attention reference (and KV writes) against naive dense causal attention in float64."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.paged_attention import kv_slots, paged_attention, write_kv

PAGE, MAX_PAGES, NUM_PAGES, KVH, GROUP, D = 4, 6, 40, 2, 3, 8


def _naive(q, k, v, positions, ctx, qlen, window):
    """q [T, H, D] of one row, k/v [S, KVH, D] dense: explicit loops, float64."""
    out = np.zeros(q.shape, np.float64)
    for t in range(qlen):
        p = positions[t]
        for h in range(q.shape[1]):
            keys = [j for j in range(ctx) if j <= p and (window is None or j > p - window)]
            s = np.array([q[t, h] @ k[j, h // GROUP] for j in keys]) / np.sqrt(D)
            w = np.exp(s - s.max())
            out[t, h] = (w / w.sum()) @ v[keys, h // GROUP]
    return out


def _scenario(rng, t):
    """Rows: (context length after the step, real queries this step); one padding row."""
    rows = [(21, t), (3, min(t, 3)), (0, 0), (9, 1), (24, t)]
    b = len(rows)
    k = rng.standard_normal((b, MAX_PAGES * PAGE, KVH, D)).astype(np.float32)
    v = rng.standard_normal((b, MAX_PAGES * PAGE, KVH, D)).astype(np.float32)
    q = rng.standard_normal((b, t, KVH * GROUP, D)).astype(np.float32)
    perm = rng.permutation(np.arange(1, NUM_PAGES))
    tables = np.zeros((b, MAX_PAGES), np.int32)
    k_pages = np.zeros((NUM_PAGES, PAGE, KVH, D), np.float32)
    v_pages = np.zeros_like(k_pages)
    positions = rng.integers(0, 50, size=(b, t)).astype(np.int32)  # padding: arbitrary
    ctx = np.array([c for c, _ in rows], np.int32)
    qlen = np.array([n for _, n in rows], np.int32)
    used = 0
    for i, (c, n) in enumerate(rows):
        pages = -(-c // PAGE)
        tables[i, :pages] = perm[used : used + pages]
        used += pages
        for j in range(c):  # everything before this step's tokens is already cached
            slot = tables[i, j // PAGE] * PAGE + j % PAGE
            if j < c - n:
                k_pages.reshape(-1, KVH, D)[slot] = k[i, j]
                v_pages.reshape(-1, KVH, D)[slot] = v[i, j]
        positions[i, :n] = np.arange(c - n, c)
    new_k = np.stack([np.resize(k[i, c - n : c], (t, KVH, D)) if n else np.zeros((t, KVH, D), np.float32)
                      for i, (c, n) in enumerate(rows)])
    new_v = np.stack([np.resize(v[i, c - n : c], (t, KVH, D)) if n else np.zeros((t, KVH, D), np.float32)
                      for i, (c, n) in enumerate(rows)])
    return q, k, v, k_pages, v_pages, new_k, new_v, tables, ctx, positions, qlen


@pytest.mark.parametrize("t,window", [(1, None), (7, None), (7, 5), (1, 4)])
def test_write_then_attend_matches_naive_causal_attention(t, window):
    rng = np.random.default_rng(t * 10 + (window or 0))
    q, k, v, k_pages, v_pages, new_k, new_v, tables, ctx, positions, qlen = _scenario(rng, t)
    slots = kv_slots(jnp.asarray(positions), jnp.asarray(qlen), jnp.asarray(tables), PAGE)
    kp, vp = write_kv(jnp.asarray(k_pages), jnp.asarray(v_pages), jnp.asarray(new_k), jnp.asarray(new_v), slots)
    out = np.asarray(paged_attention(
        jnp.asarray(q), kp, vp, jnp.asarray(tables), jnp.asarray(ctx), jnp.asarray(positions), jnp.asarray(qlen),
        scale=D**-0.5, sliding_window=window))
    for i in range(len(ctx)):
        want = _naive(q[i].astype(np.float64), k[i], v[i], positions[i], ctx[i], qlen[i], window)
        np.testing.assert_allclose(out[i], want, atol=1e-5, rtol=0, err_msg=f"row {i}")
    assert np.isfinite(out).all()


def test_padding_tokens_write_only_into_the_trash_page():
    rng = np.random.default_rng(0)
    q, k, v, k_pages, v_pages, new_k, new_v, tables, ctx, positions, qlen = _scenario(rng, 7)
    positions[qlen[:, None] <= np.arange(7)] = 0  # padding claims position 0, a real slot of each row
    slots = np.asarray(kv_slots(jnp.asarray(positions), jnp.asarray(qlen), jnp.asarray(tables), PAGE))
    marker = np.full_like(new_k, 1e6)
    kp, _ = write_kv(jnp.asarray(k_pages), jnp.asarray(v_pages), jnp.asarray(marker), jnp.asarray(marker),
                     jnp.asarray(slots))
    changed = np.argwhere(np.any(np.asarray(kp) != k_pages, axis=(2, 3)))  # (page, offset) pairs
    real = {(tables[i, p // PAGE], p % PAGE) for i in range(len(qlen)) for p in positions[i, : qlen[i]]}
    assert {tuple(x) for x in changed if x[0] != 0} == real
    pad_slots = slots[qlen[:, None] <= np.arange(7)]
    assert (pad_slots // PAGE == 0).all()


def test_bf16_pages_are_moved_as_bits_not_converted_whole():
    """bf16 pages: the same results as float32 pages holding the same (bf16-rounded) values, and the compiled
    step converts no page-pool-sized array (XLA's CPU backend computes bf16 gathers and scatters in float32
    by converting the whole pool, which a pool shared by many layers pays at every layer)."""
    import re

    import jax

    rng = np.random.default_rng(3)
    q, k, v, k_pages, v_pages, new_k, new_v, tables, ctx, positions, qlen = _scenario(rng, 1)
    bf = lambda x: jnp.asarray(x, jnp.bfloat16)  # noqa: E731
    args = (jnp.asarray(positions), jnp.asarray(qlen), jnp.asarray(tables), jnp.asarray(ctx))

    def step(q, kp, vp, nk, nv, positions, qlen, tables, ctx):
        slots = kv_slots(positions, qlen, tables, PAGE)
        kp, vp = write_kv(kp, vp, nk, nv, slots)
        return paged_attention(q, kp, vp, tables, ctx, positions, qlen, scale=D**-0.5), kp

    pages16 = [bf(x) for x in (q, k_pages, v_pages, new_k, new_v)]
    out16, kp16 = jax.jit(step)(*pages16, *args[:3], args[3])
    out32, kp32 = jax.jit(step)(*[x.astype(jnp.float32) for x in pages16], *args[:3], args[3])
    np.testing.assert_array_equal(np.asarray(kp16, np.float32), np.asarray(kp32))
    np.testing.assert_allclose(np.asarray(out16, np.float32), np.asarray(out32), atol=2e-2, rtol=0)

    hlo = jax.jit(step).lower(*pages16, *args[:3], args[3]).compile().as_text()
    pool = ",".join(map(str, k_pages.shape))
    assert f"bf16[{pool}]" in hlo  # the pattern below would see the pool's shape
    converted = [line for line in hlo.splitlines() if re.search(r"= f32\[" + pool + r"\]", line)]
    assert not converted, converted[:2]
