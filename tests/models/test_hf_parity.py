"""Every model family against transformers, through the paged cache: dense (Llama/Qwen2/Qwen3/Mistral) and
MoE (Qwen3-MoE, GLM-4.5 style) cases, four checks each.

For the MoE cases solo decode routes 1 token (the gathered-experts path) while prefill chunks and the 8-row
batch route many (the ragged_dot path): batched == solo also checks the two expert paths against each other.
"""

from __future__ import annotations

import dense_cases
import jax
import moe_cases
import numpy as np
import pytest
from hf_cases import NEW_TOKENS, PROMPT, HFCase
from paged_runner import PagedRunner

BUILDERS = {"dense": (dense_cases.CASES, dense_cases.build_case), "moe": (moe_cases.CASES, moe_cases.build_case)}
CASE_IDS = [f"{family}-{name}" for family, (cases, _) in BUILDERS.items() for name in sorted(cases)]


@pytest.fixture(scope="module", params=CASE_IDS)
def case(request, tmp_path_factory) -> HFCase:
    family, name = request.param.split("-", 1)
    return BUILDERS[family][1](name, tmp_path_factory.mktemp(name))


def test_teacher_forced_logprobs_match_transformers(case):
    runner = PagedRunner(case.cfg, case.params, case.mesh)
    logprobs = np.asarray(jax.nn.log_softmax(runner.prefill("seq", case.hf_tokens), axis=-1))
    print(f"{case.name}: max |logprob - HF| = {float(np.max(np.abs(logprobs - case.hf_logprobs))):.3g}")
    np.testing.assert_allclose(logprobs, case.hf_logprobs, atol=1e-4, rtol=0)


def test_greedy_decode_through_paged_cache_matches_transformers(case):
    runner = PagedRunner(case.cfg, case.params, case.mesh, seed=1)
    assert PROMPT + runner.greedy("seq", PROMPT, NEW_TOKENS) == case.hf_tokens


def test_prefill_in_uneven_chunks_equals_one_shot(case):
    cfg, params, mesh, tokens = case.cfg, case.params, case.mesh, case.hf_tokens
    one_shot = PagedRunner(cfg, params, mesh).prefill("seq", tokens)
    chunked_runner = PagedRunner(cfg, params, mesh, seed=2)
    chunks = [tokens[:5], tokens[5:8], tokens[8:]]
    chunked = np.concatenate([chunked_runner.step([("seq", c)], 16)[0] for c in chunks])
    np.testing.assert_allclose(chunked, one_shot, atol=1e-5, rtol=0)
    # The cache the chunks left behind decodes like the one-shot cache.
    nxt = int(np.argmax(chunked[-1]))
    decoded = chunked_runner.step([("seq", [nxt])], 1)[0][-1]
    reference = PagedRunner(cfg, params, mesh, seed=3)
    reference.prefill("seq", tokens)
    np.testing.assert_allclose(decoded, reference.step([("seq", [nxt])], 1)[0][-1], atol=1e-5, rtol=0)


def test_request_decoded_alone_equals_decoded_in_batch_of_8_with_padding_rows(case):
    cfg, params, mesh = case.cfg, case.params, case.mesh
    rng = np.random.default_rng(0)
    others = {i: rng.integers(1, cfg.vocab_size, size=int(rng.integers(2, 15))).tolist() for i in (0, 2, 4, 5, 7)}
    target_row = 3

    alone = PagedRunner(cfg, params, mesh, seed=4)
    alone_logits = [alone.prefill("target", PROMPT)[-1]]
    alone_tokens = []
    for _ in range(NEW_TOKENS):
        alone_tokens.append(int(np.argmax(alone_logits[-1])))
        alone_logits.append(alone.step([("target", [alone_tokens[-1]])], 1)[0][-1])

    batched = PagedRunner(cfg, params, mesh, seed=5)
    prompts = {**others, target_row: PROMPT}
    rows = [(i, prompts[i]) if i in prompts else None for i in range(8)]  # rows 1 and 6 are padding
    last = {i: out[-1] for i, out in enumerate(batched.step(rows, 16)) if out is not None}
    generated = {i: [] for i in prompts}
    batch_logits = [last[target_row]]
    for _ in range(NEW_TOKENS):
        for i in prompts:
            generated[i].append(int(np.argmax(last[i])))
        rows = [(i, [generated[i][-1]]) if i in prompts else None for i in range(8)]
        last = {i: out[-1] for i, out in enumerate(batched.step(rows, 1)) if out is not None}
        batch_logits.append(last[target_row])

    assert generated[target_row] == alone_tokens == case.hf_tokens[len(PROMPT):]
    np.testing.assert_allclose(np.stack(batch_logits), np.stack(alone_logits), atol=1e-5, rtol=0)
    for i in others:  # the neighbours were not disturbed either
        assert generated[i] == case.hf_greedy(others[i], NEW_TOKENS), f"row {i}"
