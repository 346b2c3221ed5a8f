"""The engine end to end on the tiny default model: batching, seeds, prefix cache, stops, aborts."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from dgjax.llm import LLM
from dgjax.runtime.engine import QueueFullError
from dgjax.runtime.types import FinishReason, GenerationRequest, SamplingParams

from engine_harness import MODEL_DIR, small_engine_config

PROMPTS = [
    "The built-in functions are",
    "A class definition",
    "Exceptions can be raised with the raise statement, which",
    "for loop",
    "Comparisons can be chained arbitrarily, e.g. x < y <= z is equivalent to x < y and y <= z",
    "import",
    "The with statement is used to wrap the execution of a block",
    "Lambda expressions (sometimes called lambda forms) are used to create anonymous functions.",
]


@pytest.fixture(scope="module")
def llm():
    m = LLM(MODEL_DIR, small_engine_config())
    yield m
    m.close()


def greedy(n):
    return SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)


def test_batched_equals_solo_greedy_and_seeded(llm):
    solo = llm.generate(PROMPTS[0], greedy(12))[0]
    batch = llm.generate(PROMPTS, greedy(12))
    assert batch[0].token_ids == solo.token_ids
    assert all(len(b.token_ids) == 12 for b in batch)
    seeded = SamplingParams(max_tokens=12, temperature=0.9, top_p=0.95, seed=1234, ignore_eos=True)
    solo_s = llm.generate(PROMPTS[2], seeded)[0]
    batch_s = llm.generate(PROMPTS[:5], seeded)
    assert batch_s[2].token_ids == solo_s.token_ids


def test_same_seed_same_output_different_seed_differs(llm):
    p = SamplingParams(max_tokens=16, temperature=1.0, seed=7, ignore_eos=True)
    a = llm.generate(PROMPTS[1], p)[0]
    b = llm.generate(PROMPTS[1], p)[0]
    c = llm.generate(PROMPTS[1], SamplingParams(max_tokens=16, temperature=1.0, seed=8, ignore_eos=True))[0]
    assert a.token_ids == b.token_ids
    assert a.token_ids != c.token_ids


def test_prefix_cache_hit_gives_the_cold_answer(llm):
    tok = llm.tokenizer
    first = tok.encode(" ".join(PROMPTS))  # spans many 8-token pages
    llm.generate([first], greedy(4))
    follow = first + tok.encode(" And then the next question about generators")
    hit = llm.generate([follow], greedy(10))[0]
    assert hit.num_cached_tokens >= (len(first) // 8 - 1) * 8
    # prompt_logprobs requests never read the prefix cache: a cold prefill of the same prompt
    cold = llm.generate([follow], SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True,
                                                 prompt_logprobs=0))[0]
    assert cold.num_cached_tokens == 0
    assert hit.token_ids == cold.token_ids


def test_max_tokens_and_context_limit(llm):
    out = llm.generate(PROMPTS[3], greedy(7))[0]
    assert len(out.token_ids) == 7 and out.finish_reason == FinishReason.LENGTH
    no_limit = llm.generate(PROMPTS[3], SamplingParams(temperature=0.0, ignore_eos=True))[0]
    assert len(out.prompt_token_ids) + len(no_limit.token_ids) == 256
    assert no_limit.finish_reason == FinishReason.LENGTH
    assert no_limit.token_ids[:7] == out.token_ids


def test_stop_token_id_and_stop_string(llm):
    ref = llm.generate(PROMPTS[4], greedy(24))[0]
    stop_tok = ref.token_ids[5]
    first = ref.token_ids.index(stop_tok)
    out = llm.generate(PROMPTS[4], SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True,
                                                  stop_token_ids=[stop_tok]))[0]
    assert out.token_ids == ref.token_ids[: first + 1]
    assert out.finish_reason == FinishReason.STOP
    words = ref.text.split()
    stop = next(w for w in words[1:] if len(w) >= 3)
    cut = llm.generate(PROMPTS[4], SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True,
                                                  stop=[stop]))[0]
    assert cut.finish_reason == FinishReason.STOP
    assert cut.text == ref.text[: ref.text.index(stop)]


def test_logprobs_match_prompt_logprobs_of_the_continuation(llm):
    tok = llm.tokenizer
    prompt = tok.encode(PROMPTS[6])
    gen = llm.generate([prompt], SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True,
                                                logprobs=3))[0]
    assert len(gen.logprobs) == 20
    for rec, t in zip(gen.logprobs, gen.token_ids):
        assert rec.token_id == t and len(rec.top) == 3
        assert rec.top[0][0] == t and abs(rec.top[0][1] - rec.logprob) < 1e-6
    full = prompt + gen.token_ids[:-1]
    echo = llm.generate([full], SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=2))[0]
    assert echo.prompt_logprobs[0] is None and len(echo.prompt_logprobs) == len(full)
    tf = [echo.prompt_logprobs[i].logprob for i in range(len(prompt), len(full))]
    np.testing.assert_allclose(tf, [r.logprob for r in gen.logprobs[:-1]], atol=1e-4)


def test_logit_bias_and_frequency_penalty_reach_the_device(llm):
    forced = llm.generate(PROMPTS[5], SamplingParams(max_tokens=5, temperature=0.0, ignore_eos=True,
                                                     logit_bias={42: 100.0}))[0]
    assert forced.token_ids == [42] * 5
    plain = llm.generate(PROMPTS[5], greedy(40))[0]
    assert len(set(plain.token_ids)) < 40  # the tiny model repeats itself under greedy decoding
    penal = llm.generate(PROMPTS[5], SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True,
                                                    frequency_penalty=1000.0))[0]
    assert len(set(penal.token_ids)) == 40


def test_abort_frees_pages_and_slot(llm):
    engine = llm.engine
    first = threading.Event()
    done = threading.Event()
    outs = []

    def on_output(o):
        outs.append(o)
        first.set()
        if o.finished:
            done.set()

    ids = llm.tokenizer.encode(PROMPTS[2])
    engine.submit(GenerationRequest("abort-me", ids, SamplingParams(temperature=0.0, ignore_eos=True)),
                  on_output)
    assert first.wait(60)
    engine.abort("abort-me")
    assert done.wait(60)
    assert outs[-1].finish_reason == FinishReason.ABORT
    assert sum(len(o.token_ids) for o in outs) < 256 - len(ids)
    deadline = time.monotonic() + 10
    while engine.stats().num_running and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = engine.stats()
    assert stats.num_running == 0 and stats.kv_usage == 0.0
    assert llm.generate(PROMPTS[0], greedy(3))[0].finish_reason == FinishReason.LENGTH


def test_bad_prompts_are_refused_before_queueing(llm):
    engine = llm.engine
    with pytest.raises(ValueError, match="context"):
        engine.submit(GenerationRequest("long", [5] * 256, SamplingParams()), lambda o: None)
    with pytest.raises(ValueError, match="vocabulary"):
        engine.submit(GenerationRequest("oov", [5, 99999], SamplingParams()), lambda o: None)
    with pytest.raises(ValueError, match="empty"):
        engine.submit(GenerationRequest("empty", [], SamplingParams()), lambda o: None)


def test_queue_full_raises():
    m = LLM(MODEL_DIR, small_engine_config(max_queue=2, max_concurrency=1, decode_buckets=(1,)))
    try:
        assert m.engine._loaded.executor.decode_buckets == (2,)  # one slot + the pad slot (MIN_DECODE_WIDTH)
        assert m.engine._loaded.executor.pdl_mode == "auto"  # dense bf16: early PDL triggers (pallas/pdl.py)
        running = threading.Event()
        long = SamplingParams(max_tokens=200, temperature=0.0, ignore_eos=True)
        m.engine.submit(GenerationRequest("a", [1, 2, 3], long), lambda o: running.set())
        assert running.wait(60)
        m.engine.submit(GenerationRequest("b", [1, 2, 3], long), lambda o: None)
        m.engine.submit(GenerationRequest("c", [1, 2, 3], long), lambda o: None)
        with pytest.raises(QueueFullError):
            m.engine.submit(GenerationRequest("d", [1, 2, 3], long), lambda o: None)
    finally:
        m.close()


def test_offline_chat_renders_the_template_like_transformers(llm):
    from transformers import AutoTokenizer

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a tuple?"}]
    expected = AutoTokenizer.from_pretrained(MODEL_DIR).apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    reply = llm.chat(messages, greedy(6))
    assert reply.prompt_token_ids == list(expected)
    assert reply.token_ids == llm.generate([list(expected)], greedy(6))[0].token_ids
