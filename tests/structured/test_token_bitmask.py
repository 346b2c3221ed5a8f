"""The device side of structured output: the sampler applies llguidance's bitmask so that a masked
token is never drawn, whatever else the row asks for, and an all-ones row changes nothing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from llguidance.numpy import apply_token_bitmask_inplace

from dgjax.runtime.sampler import apply_token_bitmask, build_sampling_tensors, sample
from dgjax.runtime.types import SamplingParams

VOCAB = 1001  # not a multiple of 32: the last mask word is partly padding
BATCH = 8
WORDS = (VOCAB + 31) // 32
NUM_TOP = 5
sample_jit = jax.jit(sample, static_argnames="num_top_logprobs")
mask_jit = jax.jit(apply_token_bitmask)

ROW_PARAMS = [
    SamplingParams(temperature=0.0),
    SamplingParams(temperature=1.0),
    SamplingParams(temperature=0.7, top_k=5),
    SamplingParams(temperature=1.3, top_p=0.5),
    SamplingParams(temperature=1.0, min_p=0.3),
    SamplingParams(temperature=1.0, repetition_penalty=1.5, presence_penalty=1.0),
    SamplingParams(temperature=0.0, logit_bias={}),  # filled per trial: +100 on masked ids
    SamplingParams(temperature=2.0, frequency_penalty=-2.0),
]


def random_bitmask(rng, allowed_per_row) -> tuple[np.ndarray, np.ndarray]:
    """(bitmask [B, W] int32 in llguidance's layout, allowed bool [B, V])."""
    allowed = np.zeros((len(allowed_per_row), VOCAB), bool)
    for i, k in enumerate(allowed_per_row):
        allowed[i, rng.choice(VOCAB, size=k, replace=False)] = True
    padded = np.zeros((len(allowed_per_row), WORDS * 32), bool)
    padded[:, :VOCAB] = allowed
    bitmask = np.packbits(padded, axis=1, bitorder="little").view(np.int32)
    return bitmask, allowed


def test_mask_matches_llguidance_reference():
    rng = np.random.default_rng(0)
    for trial in range(5):
        bitmask, _ = random_bitmask(rng, rng.integers(1, VOCAB, size=BATCH))
        bitmask[0, -1] = -1  # set padding bits past the vocabulary too
        logits = rng.standard_normal((BATCH, VOCAB)).astype(np.float32)
        expected = logits.copy()
        apply_token_bitmask_inplace(expected, bitmask)
        np.testing.assert_array_equal(np.asarray(mask_jit(logits, bitmask)), expected)


def _sample(logits, params, bitmask, counts, step):
    st = build_sampling_tensors(params, BATCH, 4, list(range(BATCH)))
    prompt_mask = np.zeros((BATCH, VOCAB), bool)
    steps = np.full((BATCH,), step, np.int32)
    res = sample_jit(jnp.asarray(logits), st, counts, prompt_mask, steps,
                     num_top_logprobs=NUM_TOP, bitmask=bitmask)
    return jax.tree.map(np.asarray, res)


def test_masked_tokens_are_never_sampled_under_any_sampling_options():
    rng = np.random.default_rng(1)
    for trial in range(12):
        sizes = rng.choice([1, 2, 3, 50, 900], size=BATCH)
        bitmask, allowed = random_bitmask(rng, sizes)
        logits = (rng.standard_normal((BATCH, VOCAB)) * 3).astype(np.float32)
        banned = np.flatnonzero(~allowed[6])[:4]
        params = list(ROW_PARAMS)
        params[6] = SamplingParams(temperature=0.0, logit_bias={int(t): 100.0 for t in banned})
        counts = rng.integers(0, 3, size=(BATCH, VOCAB)).astype(np.int32)
        res = _sample(logits, params, bitmask, counts, step=trial)
        for i in range(BATCH):
            assert allowed[i, res.tokens[i]], (trial, i)
            assert np.isfinite(res.logprobs[i])
            finite = np.isfinite(res.top_logprobs[i])
            assert allowed[i, res.top_ids[i][finite]].all()
            # logprobs are those of the constrained distribution (float64 reference)
            z = np.where(allowed[i], logits[i].astype(np.float64), -np.inf)
            ref = z[res.tokens[i]] - np.log(np.exp(z[allowed[i]] - z.max()).sum()) - z.max()
            np.testing.assert_allclose(res.logprobs[i], ref, rtol=1e-5, atol=1e-5)
        for i in (0, 6):  # greedy rows pick the best allowed token (row 6 despite its bias)
            biased = logits[i] + (np.isin(np.arange(VOCAB), banned) * 100.0 if i == 6 else 0)
            assert res.tokens[i] == np.flatnonzero(allowed[i])[np.argmax(biased[allowed[i]])]


def test_all_ones_mask_changes_nothing():
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((BATCH, VOCAB)).astype(np.float32)
    counts = np.zeros((BATCH, VOCAB), np.int32)
    st = build_sampling_tensors(ROW_PARAMS, BATCH, 4, list(range(BATCH)))
    steps = np.full((BATCH,), 3, np.int32)
    prompt_mask = np.zeros((BATCH, VOCAB), bool)
    ones = np.full((BATCH, WORDS), -1, np.int32)
    masked = jax.tree.map(np.asarray, sample_jit(logits, st, counts, prompt_mask, steps,
                                                 num_top_logprobs=NUM_TOP, bitmask=ones))
    plain = jax.tree.map(np.asarray, sample_jit(logits, st, counts, prompt_mask, steps,
                                                num_top_logprobs=NUM_TOP))
    for a, b in zip(jax.tree.leaves(masked), jax.tree.leaves(plain)):
        np.testing.assert_array_equal(a, b)
