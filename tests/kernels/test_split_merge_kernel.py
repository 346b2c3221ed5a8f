"""The split-K merge kernel (interpreted on CPU, and lowered for CUDA) against ref.py, and its dispatch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.pallas.split_merge import api, kernel, ref


def _partials(seed, b, kvh, s, gp, d, empty_splits=True, empty_row=True):
    """Partials as the attention kernels leave them: l == 0 and m == -inf (acc 0) for a split with no keys."""
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(b, kvh, s, gp)).astype(np.float32) * 4
    l = rng.uniform(1.0, 50.0, size=(b, kvh, s, gp)).astype(np.float32)
    acc = (rng.normal(size=(b, kvh, s, gp, d)) * l[..., None]).astype(np.float32)
    if empty_splits and s > 1:  # trailing splits past a row's context found no keys
        first_empty = rng.integers(1, s, size=b)
        empty = (np.arange(s)[None, :] >= first_empty[:, None])[:, None, :, None]  # [B, 1, S, 1]
        m = np.where(empty, -np.inf, m).astype(np.float32)
        l = np.where(empty, 0.0, l).astype(np.float32)
        acc = np.where(empty[..., None], 0.0, acc).astype(np.float32)
    if empty_row:  # a padding row: every split empty
        m[-1, -1] = -np.inf
        l[-1, -1] = 0.0
        acc[-1, -1] = 0.0
    return jnp.asarray(acc), jnp.asarray(m), jnp.asarray(l)


def _err(got, want, acc, m, l, group):
    """max |got - want| relative to the merge of |acc|: the scale of the summed terms, so that cancelling
    terms (a near-zero output) do not inflate the error of a float32 sum."""
    scale = np.asarray(ref.merge_splits(jnp.abs(acc), m, l, group, jnp.float32))
    diff = np.abs(np.asarray(got, np.float32) - np.asarray(want, np.float32))
    assert not (diff[scale == 0] > 0).any()  # rows with no key: both zeros
    return float(np.max(diff / np.where(scale == 0, 1.0, scale)))


@pytest.mark.parametrize("b,kvh,s,group,d", [
    (1, 8, 17, 8, 128), (1, 8, 64, 8, 128), (2, 4, 3, 4, 64), (4, 2, 18, 16, 128), (3, 1, 2, 8, 64),
    (1, 1, 1, 4, 64), (2, 8, 64, 16, 64), (4, 8, 18, 4, 128), (2, 2, 17, 3, 64),
])
@pytest.mark.parametrize("out_dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_kernel_matches_reference(b, kvh, s, group, d, out_dtype):
    acc, m, l = _partials(b * 1000 + kvh * 100 + s, b, kvh, s, 16, d, empty_row=b > 1)
    got = kernel.merge_splits(acc, m, l, group=group, out_dtype=out_dtype, interpret=True)
    want = ref.merge_splits(acc, m, l, group, out_dtype)
    assert got.shape == want.shape == (b, kvh, group, d) and got.dtype == want.dtype == out_dtype
    err = _err(got, want, acc, m, l, group)
    if out_dtype == jnp.float32:
        assert err <= 1e-6, err
        if s <= 2:  # the same sums as XLA's
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    else:  # float32 results this close round to the same bf16 but at ties: one bf16 step at most
        assert err <= 2 ** -8, err
        assert np.mean(np.asarray(got) != np.asarray(want)) < 1e-3


def test_empty_rows_are_zeros_and_empty_splits_are_ignored():
    acc, m, l = _partials(5, 2, 2, 6, 16, 64, empty_splits=False, empty_row=True)
    m = m.at[0, 0, 3:].set(-jnp.inf)  # row 0, head 0: splits 3.. found no keys
    l = l.at[0, 0, 3:].set(0.0)
    acc = acc.at[0, 0, 3:].set(0.0)
    got = kernel.merge_splits(acc, m, l, group=8, out_dtype=jnp.float32, interpret=True)
    want = ref.merge_splits(acc[:, :, :3], m[:, :, :3], l[:, :, :3], 8, jnp.float32)
    assert _err(got[:1, :1], want[:1, :1], acc[:1, :1, :3], m[:1, :1, :3], l[:1, :1, :3], 8) <= 1e-6
    assert float(jnp.max(jnp.abs(got[1, 1]))) == 0.0 and not bool(jnp.isnan(got).any())


@pytest.mark.parametrize("block_d", [32, 64])
def test_blocks_of_head_dim_give_the_same_result(block_d):
    acc, m, l = _partials(9, 2, 2, 5, 16, 128)
    whole = kernel.merge_splits(acc, m, l, group=8, out_dtype=jnp.float32, interpret=True)
    split = kernel.merge_splits(acc, m, l, group=8, out_dtype=jnp.float32, block_d=block_d, interpret=True)
    np.testing.assert_array_equal(np.asarray(whole), np.asarray(split))


@pytest.mark.parametrize("s,group,d,out_dtype", [(17, 8, 128, jnp.bfloat16), (3, 4, 64, jnp.float32),
                                                 (64, 16, 128, jnp.bfloat16), (5, 3, 128, jnp.bfloat16)])
def test_kernel_lowers_to_a_valid_triton_module(s, group, d, out_dtype, verified_triton_lowering):
    """Lower for CUDA without a GPU and verify the Triton module (S no power of two, group below GP)."""
    b, kvh, gp = 2, 8, 16
    spec = jax.ShapeDtypeStruct
    args = [spec((b, kvh, s, gp, d), jnp.float32), spec((b, kvh, s, gp), jnp.float32),
            spec((b, kvh, s, gp), jnp.float32)]
    lowered = jax.jit(lambda *a: kernel.merge_splits(*a, group=group, out_dtype=out_dtype)).trace(*args).lower(
        lowering_platforms=("cuda",))
    assert verified_triton_lowering == [True] and f"split_merge_s{s}_g{gp}_d{d}" in lowered.as_text()


def test_attention_merge_runs_the_kernel_only_for_small_batches(verified_triton_lowering):
    """merge_for_attention (what the decode kernels call): the kernel at B <= MAX_KERNEL_ROWS (the decode
    widths it was timed at on the H200), the jnp merge above."""
    spec = jax.ShapeDtypeStruct
    for b in (api.MAX_KERNEL_ROWS, api.MAX_KERNEL_ROWS + 2):
        args = (spec((b, 4, 9, 16, 128), jnp.float32), spec((b, 4, 9, 16), jnp.float32),
                spec((b, 4, 9, 16), jnp.float32))
        text = jax.jit(lambda *a: api.merge_for_attention(*a, group=8, out_dtype=jnp.bfloat16, interpret=False)
                       ).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
        assert ("split_merge" in text) == (b <= api.MAX_KERNEL_ROWS)
    assert verified_triton_lowering == [True]


def test_the_kernel_row_limit_follows_the_environment(monkeypatch):
    """DGJAX_SPLIT_MERGE_ROWS moves the batch limit (the A/B of campaign_s9b); nonsense is refused."""
    spec = jax.ShapeDtypeStruct
    b = api.MAX_KERNEL_ROWS + 2
    args = (spec((b, 4, 9, 16, 128), jnp.float32), spec((b, 4, 9, 16), jnp.float32), spec((b, 4, 9, 16), jnp.float32))

    def lowered():
        return jax.jit(lambda *a: api.merge_for_attention(*a, group=8, out_dtype=jnp.bfloat16, interpret=False)
                       ).trace(*args).lower(lowering_platforms=("cuda",)).as_text()

    monkeypatch.setenv(api.ROWS_ENV_VAR, str(b))
    assert "split_merge" in lowered()
    monkeypatch.setenv(api.ROWS_ENV_VAR, "all")
    with pytest.raises(ValueError, match=api.ROWS_ENV_VAR):
        lowered()


def test_a_group_that_is_not_a_power_of_two_needs_no_slice_after_the_kernel():
    """GLM-4.5-Air's 12 q heads per KV head: the kernel stores only the real rows, so the merged output needs no
    slice of a padded [.., 16, D] result (a copy kernel per layer on the GPU)."""
    spec = jax.ShapeDtypeStruct
    acc, stat = spec((1, 8, 33, 16, 128), jnp.float32), spec((1, 8, 33, 16), jnp.float32)
    closed = jax.make_jaxpr(lambda a, m, l: kernel.merge_splits(a, m, l, group=12, out_dtype=jnp.bfloat16))(
        acc, stat, stat)

    def outer(jaxpr):
        for eqn in jaxpr.eqns:
            yield eqn.primitive.name
            inner = eqn.params.get("jaxpr")
            if eqn.primitive.name != "pallas_call" and hasattr(inner, "jaxpr"):
                yield from outer(inner.jaxpr)

    names = list(outer(closed.jaxpr))
    assert "pallas_call" in names and not {"slice", "dynamic_slice", "gather"} & set(names), names
