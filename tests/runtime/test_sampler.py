"""The on-device sampler against an independent float64 numpy reference of vLLM's semantics."""

from __future__ import annotations

import dataclasses

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.runtime.sampler import (
    SamplingTensors,
    build_sampling_tensors,
    process_logits,
    sample,
    token_logprobs,
    update_counts,
)
from dgjax.runtime.types import MAX_TOP_LOGPROBS, SamplingParams

BIAS_WIDTH = 4
VOCAB = 300  # most tests share this vocabulary and a few batch widths
sample_jit = jax.jit(sample, static_argnames="num_top_logprobs")
process_jit = jax.jit(process_logits)


def run_sample(logits, params, *, counts=None, prompt_mask=None, step=0, default_seeds=None):
    """Sample a batch as wide as `logits`; rows past len(params) are padding.

    Always asks for top logprobs, and the tests share a few batch shapes, so few compilations.
    """
    batch, vocab = logits.shape
    if default_seeds is None:
        default_seeds = [1000 + i for i in range(len(params))]
    st = build_sampling_tensors(params, batch, BIAS_WIDTH, default_seeds)
    counts = np.zeros((batch, vocab), np.int32) if counts is None else counts
    prompt_mask = np.zeros((batch, vocab), bool) if prompt_mask is None else prompt_mask
    steps = np.broadcast_to(np.asarray(step, np.int32), (batch,))
    res = sample_jit(jnp.asarray(logits, jnp.float32), st, counts, prompt_mask, steps,
                     num_top_logprobs=MAX_TOP_LOGPROBS)
    return jax.tree.map(np.asarray, res)


# ---------------------------------------------------------------- numpy reference (float64)


def ref_softmax(z):
    z = np.asarray(z, np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def ref_log_softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def ref_process(logits, p: SamplingParams, counts, prompt_mask):
    """logit_bias, repetition penalty (prompt or output), then frequency and presence (output)."""
    x = np.asarray(logits, np.float64).copy()
    for token, value in p.logit_bias.items():
        if 0 <= token < x.size:
            x[token] += value
    for token in range(x.size):
        if counts[token] > 0 or prompt_mask[token]:
            if x[token] > 0:
                x[token] /= p.repetition_penalty
            else:
                x[token] *= p.repetition_penalty
        x[token] -= p.frequency_penalty * counts[token]
        x[token] -= p.presence_penalty * (counts[token] > 0)
    return x


def ref_filtered_distribution(x, p: SamplingParams):
    """HF/vLLM-v0 style: temperature, top_k (ties kept), top_p (ascending cumsum), min_p."""
    z = np.asarray(x, np.float64) / p.temperature
    vocab = z.size
    keep = np.isfinite(z)
    if 0 < p.top_k < vocab:
        kth = np.sort(z)[::-1][p.top_k - 1]
        keep &= z >= kth
    if p.top_p < 1.0:
        probs = np.where(keep, np.exp(z - z[keep].max()), 0.0)
        probs /= probs.sum()
        ascending = np.argsort(probs, kind="stable")
        cumulative = np.cumsum(probs[ascending])
        remove = cumulative <= 1.0 - p.top_p
        remove[-1] = False
        keep[ascending[remove]] = False
    if p.min_p > 0.0:
        probs = np.where(keep, np.exp(z - z[keep].max()), 0.0)
        probs /= probs.sum()
        keep &= probs >= p.min_p * probs.max()
    dist = np.where(keep, np.exp(z - z[keep].max()), 0.0)
    return keep, dist / dist.sum()


def top_p_keeping(z, n, top_k=0):
    """A top_p that keeps exactly the n most likely tokens (of the top_k, when given), midway
    between the boundaries."""
    z = np.sort(np.asarray(z, np.float64))[::-1][:top_k or None]
    cumulative = np.cumsum(ref_softmax(z))
    return float((cumulative[n - 1] + cumulative[n - 2]) / 2) if n > 1 else float(cumulative[0] / 2)


def min_p_keeping(z, n):
    """A min_p that keeps exactly the n most likely tokens, midway between the ratios."""
    ratios = np.sort(ref_softmax(z))[::-1] / ref_softmax(z).max()
    return float((ratios[n - 1] + ratios[n]) / 2)


# ---------------------------------------------------------------- tests


def test_greedy_rows_take_the_argmax_and_padding_rows_are_greedy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(8, 300)).astype(np.float32)
    params = [SamplingParams(temperature=0.0), None, SamplingParams(temperature=0.0, seed=5)]
    res = run_sample(logits, params)
    np.testing.assert_array_equal(res.tokens, logits.argmax(axis=-1))


def test_logit_bias_forces_and_bans_tokens():
    rng = np.random.default_rng(1)
    vocab = VOCAB
    logits = rng.normal(size=(8, vocab)).astype(np.float32)
    forced = [SamplingParams(temperature=1.0, seed=s, logit_bias={7: 100.0}) for s in range(8)]
    for step in range(3):
        assert (run_sample(logits, forced, step=step).tokens == 7).all()

    best = logits.argmax(axis=-1)
    second = np.argsort(-logits, axis=-1, kind="stable")[:, 1]
    banned = [
        SamplingParams(temperature=0.0, logit_bias={int(best[i]): -100.0, vocab + 3: 50.0})
        for i in range(8)
    ]  # the out-of-vocabulary id is ignored
    np.testing.assert_array_equal(run_sample(logits, banned).tokens, second)


def test_penalties_and_bias_match_numpy():
    rng = np.random.default_rng(2)
    batch, vocab = 8, VOCAB  # the last two rows are padding
    logits = rng.normal(scale=2.0, size=(batch, vocab)).astype(np.float32)
    logits[:, :3] = [0.0, 2.5, -2.5]
    counts = rng.integers(0, 4, size=(batch, vocab)).astype(np.int32) * (rng.random((batch, vocab)) < 0.4)
    counts[:, 0] = 2
    prompt_mask = rng.random((batch, vocab)) < 0.3
    # Token 10 leads token 11 narrowly but was seen, so every penalty below flips the greedy choice.
    logits[:, 10:12] = [8.0, 7.7]
    counts[:, 10:12] = [2, 0]
    prompt_mask[:, 10:12] = [True, False]
    params = [
        SamplingParams(temperature=0.0, repetition_penalty=1.3),
        SamplingParams(temperature=0.0, presence_penalty=0.7),
        SamplingParams(temperature=0.0, frequency_penalty=0.45),
        SamplingParams(temperature=0.0, repetition_penalty=0.8, presence_penalty=-0.5,
                       frequency_penalty=1.5, logit_bias={1: 3.0, 5: -2.0}),
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.0, repetition_penalty=2.0, logit_bias={9: 1.0}),
    ]
    st = build_sampling_tensors(params, batch, BIAS_WIDTH, [0] * batch)
    got = np.asarray(process_jit(logits, st, counts, prompt_mask))
    params += [SamplingParams(temperature=0.0)] * 2
    want = np.stack([ref_process(logits[i], p, counts[i], prompt_mask[i]) for i, p in enumerate(params)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
    # Rows without penalties or bias come through bit-identical.
    np.testing.assert_array_equal(got[4], logits[4])

    top2 = np.sort(want, axis=-1)[:, -2:]
    assert (top2[:, 1] - top2[:, 0] > 1e-3).all()  # the greedy choice is unambiguous
    assert (want.argmax(axis=-1) != logits.argmax(axis=-1))[[0, 1, 2, 3, 5]].all()
    res = run_sample(logits, params, counts=counts, prompt_mask=prompt_mask)
    np.testing.assert_array_equal(res.tokens, want.argmax(axis=-1))
    # Each row alone: a batch whose only penalty is one kind must still apply it.
    for i, p in enumerate(params):
        alone = run_sample(logits[i:i + 1], [p], counts=counts[i:i + 1], prompt_mask=prompt_mask[i:i + 1])
        assert alone.tokens[0] == want[i].argmax(), i


@pytest.mark.parametrize(
    "make_params",
    [
        lambda z: SamplingParams(temperature=0.8),
        lambda z: SamplingParams(temperature=1.0, top_k=4),
        lambda z: SamplingParams(temperature=1.3, top_p=top_p_keeping(z / 1.3, 5)),
        lambda z: SamplingParams(temperature=1.0, min_p=min_p_keeping(z, 6)),
        lambda z: SamplingParams(temperature=1.0, top_k=8, top_p=top_p_keeping(z, 6, top_k=8),
                                 min_p=min_p_keeping(z, 4)),
    ],
    ids=["temperature", "top_k", "top_p", "min_p", "combined"],
)
def test_empirical_distribution_matches_renormalised_numpy(make_params):
    rng = np.random.default_rng(3)
    vocab, draws = 12, 4096
    z = rng.normal(scale=1.2, size=vocab)
    base = make_params(z)
    allowed, dist = ref_filtered_distribution(z, base)
    params = [dataclasses.replace(base, seed=s) for s in range(draws)]
    tokens = run_sample(np.tile(z.astype(np.float32), (draws, 1)), params, step=7).tokens

    counts = np.bincount(tokens, minlength=vocab)
    assert set(np.flatnonzero(counts)) <= set(np.flatnonzero(allowed))
    expected = draws * dist
    sigma = np.sqrt(expected * (1 - dist))
    assert (np.abs(counts - expected) <= 5 * sigma + 2).all(), (counts, expected.round(1))
    assert (counts[dist > 0.01] > 0).all()


def test_filtered_tokens_are_never_sampled_over_many_seeds():
    rng = np.random.default_rng(4)
    vocab, draws = VOCAB, 2048
    z = rng.normal(scale=1.0, size=vocab).astype(np.float32)
    temperature = 4.0  # flat enough that every token would show up without the filters
    banned = {int(t): -float("inf") for t in np.argsort(-z)[:2]}
    unbanned = np.sort(z)[:-2]
    configs = [
        SamplingParams(temperature=temperature, top_k=20),
        SamplingParams(temperature=temperature, top_p=top_p_keeping(z / temperature, 60)),
        SamplingParams(temperature=temperature, min_p=min_p_keeping(z / temperature, 90)),
        SamplingParams(temperature=temperature, top_k=100,
                       top_p=top_p_keeping(unbanned / temperature, 70, top_k=100),
                       logit_bias=banned),
    ]
    unfiltered = run_sample(np.tile(z, (draws, 1)), [SamplingParams(temperature=temperature, seed=s)
                                                     for s in range(draws)]).tokens
    assert len(set(unfiltered)) > 0.8 * vocab
    for base in configs:
        allowed, _ = ref_filtered_distribution(ref_process(z, base, np.zeros(vocab), np.zeros(vocab, bool)), base)
        params = [dataclasses.replace(base, seed=s) for s in range(draws)]
        tokens = run_sample(np.tile(z, (draws, 1)), params, step=3).tokens
        sampled = set(tokens.tolist())
        assert sampled <= set(np.flatnonzero(allowed).tolist())
        assert len(sampled) >= 0.8 * allowed.sum()


def test_top_k_keeps_every_token_tied_with_the_kth_and_is_deterministic():
    draws = 4096
    z = np.array([5.0, 3.0, 3.0, 3.0, 1.0, 0.5, 0.0, -1.0, 3.0, -2.0, 2.9, -3.0], np.float32)
    params = [SamplingParams(temperature=10.0, top_k=2, seed=s) for s in range(draws)]
    first = run_sample(np.tile(z, (draws, 1)), params).tokens
    again = run_sample(np.tile(z, (draws, 1)), params).tokens
    np.testing.assert_array_equal(first, again)
    allowed, _ = ref_filtered_distribution(z, params[0])
    assert set(first.tolist()) == set(np.flatnonzero(allowed).tolist()) == {0, 1, 2, 3, 8}


ROW_PARAMS = [
    SamplingParams(temperature=0.0),
    SamplingParams(temperature=0.7, seed=11),
    SamplingParams(temperature=1.0, top_k=5, seed=12),
    SamplingParams(temperature=1.2, top_p=0.8, seed=13),
    SamplingParams(temperature=1.0, min_p=0.1, seed=14),
    SamplingParams(temperature=0.0, repetition_penalty=1.3, logit_bias={4: 2.0}),
    SamplingParams(temperature=0.9, frequency_penalty=0.5, presence_penalty=0.3, top_k=50),
    SamplingParams(temperature=1.5, seed=16, logit_bias={0: 1.5, 1: -1.0}),
]


def _row_inputs(seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=2.0, size=(len(ROW_PARAMS), VOCAB)).astype(np.float32)
    counts = (rng.random((len(ROW_PARAMS), VOCAB)) < 0.05) * rng.integers(1, 4, (len(ROW_PARAMS), VOCAB))
    prompt_mask = rng.random((len(ROW_PARAMS), VOCAB)) < 0.05
    return logits, counts.astype(np.int32), prompt_mask


def _place(rows, width, position, logits, counts, prompt_mask, params, seeds):
    """A batch of `width` with `rows` starting at `position`; other rows are unrelated padding."""
    n = len(rows)
    out_logits = np.random.default_rng(99).normal(size=(width, VOCAB)).astype(np.float32)
    out_counts = np.zeros((width, VOCAB), np.int32)
    out_mask = np.zeros((width, VOCAB), bool)
    out_params = [None] * width
    out_seeds = [0] * width
    out_logits[position:position + n] = logits[rows]
    out_counts[position:position + n] = counts[rows]
    out_mask[position:position + n] = prompt_mask[rows]
    for j, r in enumerate(rows):
        out_params[position + j] = params[r]
        out_seeds[position + j] = seeds[r]
    return out_logits, out_counts, out_mask, out_params, out_seeds


def test_each_row_in_a_mixed_batch_equals_the_row_sampled_alone():
    logits, counts, prompt_mask = _row_inputs(5)
    seeds = [500 + i for i in range(len(ROW_PARAMS))]
    everything = range(len(ROW_PARAMS))
    for step in range(6):
        together = run_sample(logits, ROW_PARAMS, counts=counts, prompt_mask=prompt_mask,
                              step=step, default_seeds=seeds)
        for row in everything:
            # Alone: the padding rows need neither the sorted path nor the penalties.
            for width, position in [(1, 0), (4, 2)]:
                l, c, m, p, s = _place([row], width, position, logits, counts, prompt_mask,
                                       ROW_PARAMS, seeds)
                alone = run_sample(l, p, counts=c, prompt_mask=m, step=step, default_seeds=s)
                assert alone.tokens[position] == together.tokens[row], (step, row, width)
                assert alone.logprobs[position] == together.logprobs[row]
                np.testing.assert_array_equal(alone.top_ids[position], together.top_ids[row])
    # The rows really are random: a seeded sampling row changes its token across steps.
    tokens_by_step = [run_sample(logits, ROW_PARAMS, counts=counts, prompt_mask=prompt_mask,
                                 step=t, default_seeds=seeds).tokens[7] for t in range(12)]
    assert len(set(tokens_by_step)) > 3


def test_same_seed_and_step_give_the_same_token_in_any_row_and_width():
    logits, counts, prompt_mask = _row_inputs(6)
    request = SamplingParams(temperature=1.1, top_p=0.95, seed=1234)
    params = [request] * len(ROW_PARAMS)
    seeds = [0] * len(ROW_PARAMS)
    logits[:] = logits[0]
    for step in (0, 1, 17):
        reference = None
        for width, position in [(1, 0), (4, 3), (8, 5)]:
            l, c, m, p, s = _place([0], width, position, logits, counts, prompt_mask, params, seeds)
            # Neighbours: other seeded requests that make the batch use every code path.
            for other in range(width):
                if other != position:
                    p[other] = dataclasses.replace(ROW_PARAMS[other % len(ROW_PARAMS)], seed=other)
            token = run_sample(l, p, counts=c, prompt_mask=m, step=step, default_seeds=s).tokens[position]
            reference = token if reference is None else reference
            assert token == reference, (step, width, position)
    different_seeds = {
        int(run_sample(logits[:1], [dataclasses.replace(request, seed=s)]).tokens[0]) for s in range(16)
    }
    assert len(different_seeds) > 2


def test_logprobs_and_top_logprobs_are_raw_log_softmax():
    rng = np.random.default_rng(7)
    logits = rng.normal(scale=4.0, size=(8, VOCAB)).astype(np.float32)
    counts = np.zeros((8, VOCAB), np.int32)
    counts[:, :150] = 3
    params = [
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.5, top_k=3, seed=1, repetition_penalty=1.5, frequency_penalty=1.0),
        SamplingParams(temperature=2.0, top_p=0.5, seed=2, logit_bias={3: 5.0}),
    ]
    res = run_sample(logits, params, counts=counts)
    want = ref_log_softmax(logits)
    np.testing.assert_allclose(res.logprobs, want[np.arange(8), res.tokens], atol=2e-5)
    want_ids = np.argsort(-want, axis=-1, kind="stable")[:, :MAX_TOP_LOGPROBS]
    np.testing.assert_array_equal(res.top_ids, want_ids)
    np.testing.assert_allclose(res.top_logprobs, np.take_along_axis(want, want_ids, -1), atol=2e-5)


def test_top_logprobs_order_ties_by_token_id():
    rng = np.random.default_rng(11)
    logits = rng.integers(0, 6, size=(8, VOCAB)).astype(np.float32)  # dozens of exact ties
    res = run_sample(logits, [SamplingParams(temperature=0.0)])
    want_ids = np.argsort(-logits, axis=-1, kind="stable")[:, :MAX_TOP_LOGPROBS]
    np.testing.assert_array_equal(res.top_ids, want_ids)


def test_token_logprobs_over_a_long_vocabulary_match_numpy():
    """Several rounds of chunked top-k (vocabulary >> 128), with ties, as for prompt logprobs."""
    rng = np.random.default_rng(12)
    logits = np.round(rng.normal(scale=3.0, size=(5, 20000)), 1).astype(np.float32)
    tokens = rng.integers(0, 20000, size=5).astype(np.int32)
    chosen, top_ids, top_logprobs = jax.jit(token_logprobs, static_argnums=2)(
        logits, tokens, MAX_TOP_LOGPROBS
    )
    want = ref_log_softmax(logits)
    want_ids = np.argsort(-logits, axis=-1, kind="stable")[:, :MAX_TOP_LOGPROBS]
    np.testing.assert_array_equal(np.asarray(top_ids), want_ids)
    np.testing.assert_allclose(np.asarray(top_logprobs), np.take_along_axis(want, want_ids, -1), atol=2e-5)
    np.testing.assert_allclose(np.asarray(chosen), want[np.arange(5), tokens], atol=2e-5)


def test_top_logprobs_pad_when_the_vocabulary_is_smaller_than_k():
    logits = np.random.default_rng(8).normal(size=(4096, 12)).astype(np.float32)
    res = run_sample(logits, [SamplingParams(temperature=0.0)])
    assert res.top_ids.shape == (4096, MAX_TOP_LOGPROBS)
    want_ids = np.argsort(-logits, axis=-1, kind="stable")
    np.testing.assert_array_equal(res.top_ids[:, :12], want_ids)
    assert (res.top_ids[:, 12:] == -1).all() and np.isneginf(res.top_logprobs[:, 12:]).all()
    np.testing.assert_allclose(res.top_logprobs[:, :12],
                               np.take_along_axis(ref_log_softmax(logits), want_ids, -1), atol=2e-6)


def test_one_compilation_serves_every_parameter_mix():
    traces = []

    def traced_sample(*args):
        traces.append(1)
        return sample(*args, num_top_logprobs=0)

    jitted = jax.jit(traced_sample)
    rng = np.random.default_rng(9)
    logits = rng.normal(size=(4, 64)).astype(np.float32)
    counts, mask, step = np.zeros((4, 64), np.int32), np.zeros((4, 64), bool), np.zeros(4, np.int32)
    mixes = [
        [SamplingParams(temperature=0.0)],
        [SamplingParams(temperature=0.7, seed=1)],
        [SamplingParams(top_k=3), SamplingParams(top_p=0.5, min_p=0.2)],
        [SamplingParams(repetition_penalty=1.2, presence_penalty=0.5, logit_bias={1: 2.0})],
        [SamplingParams(temperature=0.0)] * 4,
    ]
    for mix in mixes:
        st = build_sampling_tensors(mix, 4, BIAS_WIDTH, [0] * len(mix))
        jax.block_until_ready(jitted(logits, st, counts, mask, step))
    assert len(traces) == 1
    assert jitted._cache_size() == 1


def _primitives(jaxpr, inside_cond=False, found=None):
    """(primitive name, whether it sits inside a lax.cond branch) for every equation."""
    found = [] if found is None else found
    for eqn in jaxpr.eqns:
        found.append((eqn.primitive.name, inside_cond))
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            _primitives(sub, inside_cond or eqn.primitive.name == "cond", found)
    return found


def test_sort_and_penalty_work_only_run_inside_lax_cond():
    batch, vocab = 4, 64
    st = build_sampling_tensors([SamplingParams()], batch, BIAS_WIDTH, [0])
    args = (np.zeros((batch, vocab), np.float32), st, np.zeros((batch, vocab), np.int32),
            np.zeros((batch, vocab), bool), np.zeros(batch, np.int32))
    closed = jax.make_jaxpr(lambda *a: sample(*a, num_top_logprobs=0))(*args)
    prims = _primitives(closed.jaxpr)
    assert ("sort", True) in prims and ("sort", False) not in prims
    assert ("cumsum", False) not in prims
    # output_counts and prompt_mask (flattened after logits and the 10 SamplingTensors leaves)
    # are read by nothing but cond equations.
    counts_var, mask_var = closed.jaxpr.invars[11], closed.jaxpr.invars[12]
    users = {eqn.primitive.name for eqn in closed.jaxpr.eqns
             for v in eqn.invars if v is counts_var or v is mask_var}
    assert users == {"cond"}


def test_update_counts_increments_active_rows_only():
    rng = np.random.default_rng(10)
    counts = rng.integers(0, 3, size=(5, 20)).astype(np.int32)
    tokens = rng.integers(0, 20, size=5).astype(np.int32)
    active = np.array([True, False, True, True, False])
    got = np.asarray(jax.jit(update_counts)(counts, tokens, active))
    want = counts.copy()
    for b in range(5):
        want[b, tokens[b]] += int(active[b])
    np.testing.assert_array_equal(got, want)


def test_build_sampling_tensors_packs_rows_and_rejects_overflow():
    params = [
        SamplingParams(temperature=0.5, top_k=7, top_p=0.9, min_p=0.05, seed=2**32 + 5,
                       logit_bias={3: 1.5, 9: -2.0}),
        None,
        SamplingParams(repetition_penalty=1.1, presence_penalty=0.2, frequency_penalty=-0.3),
    ]
    st = build_sampling_tensors(params, 5, 3, [77, 78, 79])
    assert isinstance(st, SamplingTensors)
    np.testing.assert_array_equal(st.seed, np.array([5, 0, 79, 0, 0], np.uint32))
    np.testing.assert_array_equal(st.temperature, np.float32([0.5, 0, 1.0, 0, 0]))
    np.testing.assert_array_equal(st.top_k, [7, 0, 0, 0, 0])
    np.testing.assert_array_equal(st.top_p, np.float32([0.9, 1, 1, 1, 1]))
    np.testing.assert_array_equal(st.repetition_penalty, np.float32([1, 1, 1.1, 1, 1]))
    np.testing.assert_array_equal(st.bias_ids[0], [3, 9, -1])
    np.testing.assert_array_equal(st.bias_vals[0], np.float32([1.5, -2.0, 0]))
    assert (st.bias_ids[1:] == -1).all() and (st.bias_vals[1:] == 0).all()
    with pytest.raises(ValueError, match="logit_bias"):
        build_sampling_tensors(params, 5, 1, [0, 0, 0])
    with pytest.raises(ValueError, match="width"):
        build_sampling_tensors(params, 2, 3, [0, 0, 0])
