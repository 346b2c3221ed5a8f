"""POST /v1/completions: prompt forms, n, echo, legacy logprobs (checked against transformers)."""

from __future__ import annotations

import pytest

from serving_harness import MODEL_DIR, SERVED_NAME, special_token_texts, sse_chunks

PROMPTS = ["The for statement is used to", "A function definition is"]


def complete(http, prompt, **body) -> dict:
    r = http.post("/v1/completions", json={"model": SERVED_NAME, "prompt": prompt, **body})
    assert r.status_code == 200, r.text
    return r.json()


def complete_stream(http, prompt, **body) -> list[dict]:
    r = http.post("/v1/completions", json={"model": SERVED_NAME, "prompt": prompt,
                                           "stream": True, **body})
    assert r.status_code == 200, r.text
    return sse_chunks(r)


def texts(result: dict) -> list[str]:
    return [c["text"] for c in sorted(result["choices"], key=lambda c: c["index"])]


@pytest.fixture(scope="module")
def hf_model():
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32)
    return model.eval()


def reference_logprobs(hf_model, ids: list[int]):
    """log p(ids[t] | ids[:t]) for t >= 1, and the full log-softmax rows, from transformers."""
    import torch

    with torch.no_grad():
        logits = hf_model(torch.tensor([ids])).logits[0].double()
    rows = torch.log_softmax(logits, dim=-1)
    chosen = [rows[t - 1, ids[t]].item() for t in range(1, len(ids))]
    return chosen, rows


GREEDY = dict(max_tokens=8, temperature=0.0, ignore_eos=True)


def test_prompt_forms_agree(http, hf_tokenizer):
    singles = [texts(complete(http, p, **GREEDY))[0] for p in PROMPTS]
    assert texts(complete(http, PROMPTS, **GREEDY)) == singles
    ids = [hf_tokenizer(p)["input_ids"] for p in PROMPTS]
    one = complete(http, ids[0], **GREEDY)
    assert texts(one) == singles[:1]
    assert one["usage"]["prompt_tokens"] == len(ids[0])
    both = complete(http, ids, **GREEDY)
    assert texts(both) == singles
    assert both["usage"]["prompt_tokens"] == len(ids[0]) + len(ids[1])
    assert both["usage"]["completion_tokens"] == 2 * 8


def test_cache_salt_shares_prefix_pages_only_within_one_salt(http):
    prompt = "In Python, a list comprehension builds a new list from an iterable " * 3
    cached = lambda **salt: complete(http, prompt, **GREEDY, **salt)["usage"][
        "prompt_tokens_details"]["cached_tokens"]
    assert cached(cache_salt="tenant-a") == 0
    assert cached(cache_salt="tenant-a") >= 16  # at least one whole page
    assert cached(cache_salt="tenant-b") == 0
    assert cached() == 0  # unsalted requests never see salted pages
    assert cached() >= 16


def test_n_times_prompts_layout_and_seeds(http):
    body = dict(max_tokens=8, temperature=1.0, ignore_eos=True)
    result = complete(http, PROMPTS, n=2, seed=5, **body)
    got = texts(result)
    assert len(got) == 4
    for k, text in enumerate(got):
        prompt, j = PROMPTS[k // 2], k % 2
        assert text == texts(complete(http, prompt, seed=5 + j, **body))[0]


def test_echo_returns_prompt_then_completion(http):
    plain = texts(complete(http, PROMPTS[0], **GREEDY))[0]
    assert texts(complete(http, PROMPTS[0], echo=True, **GREEDY))[0] == PROMPTS[0] + plain


def test_echo_logprobs_match_transformers(http, hf_tokenizer, hf_model):
    result = complete(http, PROMPTS[0], echo=True, logprobs=2, return_tokens_as_token_ids=True,
                      **GREEDY)
    lp = result["choices"][0]["logprobs"]
    prompt_ids = hf_tokenizer(PROMPTS[0])["input_ids"]
    ids = [int(t.removeprefix("token_id:")) for t in lp["tokens"]]
    assert ids[:len(prompt_ids)] == prompt_ids
    assert len(ids) == result["usage"]["prompt_tokens"] + result["usage"]["completion_tokens"]
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    chosen, rows = reference_logprobs(hf_model, ids)
    assert lp["token_logprobs"][1:] == pytest.approx(chosen, abs=2e-3)
    for t in range(1, len(ids)):
        top = lp["top_logprobs"][t]
        want = rows[t - 1].topk(2)
        expected = {f"token_id:{i}": v for i, v in zip(want.indices.tolist(), want.values.tolist())}
        expected.setdefault(f"token_id:{ids[t]}", rows[t - 1, ids[t]].item())
        assert top.keys() == expected.keys()
        assert list(top.values()) == pytest.approx(list(expected.values()), abs=2e-3)
    # greedy: every generated token is the reference argmax
    for t in range(len(prompt_ids), len(ids)):
        assert ids[t] == int(rows[t - 1].argmax())
    assert lp["text_offset"] == sorted(lp["text_offset"]) and lp["text_offset"][0] == 0


def test_logprobs_without_echo_cover_generated_tokens_only(http, hf_tokenizer):
    result = complete(http, PROMPTS[1], logprobs=0, **GREEDY)
    lp = result["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == 8
    assert all(x <= 0 for x in lp["token_logprobs"])
    assert all(len(d) == 1 for d in lp["top_logprobs"])  # logprobs=0: just the sampled token
    special = special_token_texts(hf_tokenizer)
    assert "".join(t for t in lp["tokens"] if t not in special) == result["choices"][0]["text"]


@pytest.mark.parametrize("extra", [{}, {"echo": True, "logprobs": 1}], ids=["plain", "echo"])
def test_streaming_matches_non_streaming(http, extra):
    full = complete(http, PROMPTS, **GREEDY, **extra)
    chunks = complete_stream(http, PROMPTS, stream_options={"include_usage": True}, **GREEDY,
                             **extra)
    assert all(c["object"] == "text_completion" for c in chunks)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == full["usage"]
    for choice in full["choices"]:
        mine = [c for chunk in chunks for c in chunk["choices"] if c["index"] == choice["index"]]
        assert "".join(c["text"] for c in mine) == choice["text"]
        assert [c["finish_reason"] for c in mine][-1] == choice["finish_reason"] == "length"
        if extra:
            tokens = [t for c in mine for t in c["logprobs"]["tokens"]]
            offsets = [o for c in mine for o in c["logprobs"]["text_offset"]]
            assert tokens == choice["logprobs"]["tokens"]
            assert offsets == choice["logprobs"]["text_offset"]


def test_openai_sdk_completions(server):
    client = server.openai()
    result = client.completions.create(model=SERVED_NAME, prompt=PROMPTS, max_tokens=6,
                                       temperature=0)
    assert len(result.choices) == 2
    assert result.usage.completion_tokens <= 12
    stream = client.completions.create(model=SERVED_NAME, prompt=PROMPTS[0], max_tokens=6,
                                       temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in stream if c.choices) == result.choices[0].text
