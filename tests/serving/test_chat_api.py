"""POST /v1/chat/completions over real HTTP against the real engine on tiny-chat."""

from __future__ import annotations

import json
import math
import os
import shutil

import pytest

from dgjax.serving.chat import render_chat_prompt
from dgjax.serving.protocol import ModelDefaults, parse_chat_request
from dgjax.text.tokenizer import Tokenizer
from serving_harness import (MAX_MODEL_LEN, MODEL_DIR, SERVED_NAME, hf_chat_ids, special_token_texts,
                             sse_chunks)

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Tell me about the for statement."},
]


def chat(http, messages=MESSAGES, **body) -> dict:
    r = http.post("/v1/chat/completions", json={"model": SERVED_NAME, "messages": messages, **body})
    assert r.status_code == 200, r.text
    return r.json()


def chat_stream(http, messages=MESSAGES, **body) -> list[dict]:
    body = {"model": SERVED_NAME, "messages": messages, "stream": True, **body}
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    return sse_chunks(r)


def streamed_choice(chunks: list[dict], index: int = 0) -> tuple[str, str | None, list]:
    """(text, finish_reason, logprob entries) of one choice, reassembled from stream chunks."""
    text, finish, logprobs = "", None, []
    for c in chunks:
        for ch in c["choices"]:
            if ch["index"] != index:
                continue
            text += ch["delta"].get("content") or ""
            finish = ch["finish_reason"] or finish
            if ch.get("logprobs"):
                logprobs += ch["logprobs"]["content"]
    return text, finish, logprobs


@pytest.mark.parametrize("sampling", [{"temperature": 0.0}, {"temperature": 1.0, "seed": 1234}],
                         ids=["greedy", "seeded"])
def test_streaming_and_non_streaming_agree(http, sampling):
    body = dict(max_tokens=24, ignore_eos=True, logprobs=True, **sampling)
    full = chat(http, **body)
    chunks = chat_stream(http, stream_options={"include_usage": True}, **body)

    text, finish, logprobs = streamed_choice(chunks)
    choice = full["choices"][0]
    assert text == choice["message"]["content"]
    assert finish == choice["finish_reason"] == "length"
    assert [e["token"] for e in logprobs] == [e["token"] for e in choice["logprobs"]["content"]]
    assert full["usage"]["completion_tokens"] == 24
    # chunk shapes: role first, one id throughout, usage null until a final choices-less chunk
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert {c["id"] for c in chunks} == {chunks[0]["id"]}
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == SERVED_NAME for c in chunks)
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == []
    counts = ("prompt_tokens", "completion_tokens", "total_tokens")
    assert [chunks[-1]["usage"][k] for k in counts] == [full["usage"][k] for k in counts]
    # the second, identical prompt was served from the prefix cache (whole pages of it)
    assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0


def test_different_seeds_sample_differently(http):
    texts = {chat(http, max_tokens=24, ignore_eos=True, temperature=1.0, seed=s)
             ["choices"][0]["message"]["content"] for s in (1, 2, 3)}
    assert len(texts) > 1


def test_usage_counts_match_transformers_template(http, hf_tokenizer):
    full = chat(http, max_tokens=12, logprobs=True, temperature=0.0)
    usage = full["usage"]
    assert usage["prompt_tokens"] == len(hf_chat_ids(hf_tokenizer, MESSAGES))
    generated = full["choices"][0]["logprobs"]["content"]
    assert usage["completion_tokens"] == len(generated) <= 12
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_content_parts_equal_plain_string(http, hf_tokenizer):
    parts = [{"role": "system", "content": [{"type": "text", "text": "You are a helpful "},
                                            {"type": "text", "text": "assistant."}]},
             MESSAGES[1]]
    joined = [{"role": "system", "content": "You are a helpful \nassistant."}, MESSAGES[1]]
    a = chat(http, parts, max_tokens=8, temperature=0.0)
    b = chat(http, joined, max_tokens=8, temperature=0.0)
    assert a["usage"]["prompt_tokens"] == len(hf_chat_ids(hf_tokenizer, joined))
    assert a["choices"][0]["message"] == b["choices"][0]["message"]


def test_tools_and_tool_messages_reach_the_template(http, hf_tokenizer):
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}
    messages = [MESSAGES[1],
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    full = chat(http, messages, tools=tools, max_tokens=4, temperature=0.0)
    # the reference gets arguments as an object, which is what templates expect
    hf_messages = [MESSAGES[1],
                   {"role": "assistant", "content": "", "tool_calls": [
                       {**call, "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                   messages[2]]
    assert full["usage"]["prompt_tokens"] == len(hf_chat_ids(hf_tokenizer, hf_messages, tools=tools))


def test_chat_template_kwargs_are_template_variables(tmp_path):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(f"{MODEL_DIR}/{name}", tmp_path / name)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    (tmp_path / "chat_template.jinja").write_text(
        "{{ greeting }}|{% for m in messages %}{{ m.role }}:{{ m.content }}|{% endfor %}"
        "{{ tools | length }}")
    tok = Tokenizer.from_dir(str(tmp_path))
    body = {"messages": [{"role": "developer", "content": "be brief"},
                         {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "chat_template_kwargs": {"greeting": "hello"}}
    ids = render_chat_prompt(tok, parse_chat_request(body, 2048, ModelDefaults()))
    assert tok.decode(ids) == "hello|system:be brief|user:hi|1"


def test_without_max_tokens_runs_to_eos_or_the_context_limit(http):
    full = chat(http, temperature=0.0)
    usage, reason = full["usage"], full["choices"][0]["finish_reason"]
    assert reason in ("stop", "length")
    if reason == "length":
        assert usage["total_tokens"] == MAX_MODEL_LEN
    # and with ignore_eos it must fill the whole context
    full = chat(http, temperature=0.0, ignore_eos=True)
    assert full["choices"][0]["finish_reason"] == "length"
    assert full["usage"]["total_tokens"] == MAX_MODEL_LEN


def test_chat_logprobs_format(http, hf_tokenizer):
    full = chat(http, max_tokens=6, ignore_eos=True, temperature=0.0, logprobs=True,
                top_logprobs=3)
    content = full["choices"][0]["logprobs"]["content"]
    assert len(content) == 6
    special = special_token_texts(hf_tokenizer)
    text = b"".join(bytes(e["bytes"]) for e in content if e["token"] not in special)
    assert text.decode("utf-8") == full["choices"][0]["message"]["content"]
    for e in content:
        assert set(e) == {"token", "logprob", "bytes", "top_logprobs"}
        assert e["token"] in special or \
            bytes(e["bytes"]).decode("utf-8", errors="replace") == e["token"]
        assert len(e["top_logprobs"]) == 3
        tops = [t["logprob"] for t in e["top_logprobs"]]
        assert tops == sorted(tops, reverse=True)
        # greedy: the chosen token is the most likely one
        assert e["top_logprobs"][0]["token"] == e["token"]
        assert math.isclose(e["top_logprobs"][0]["logprob"], e["logprob"], abs_tol=1e-5)
        assert sum(math.exp(t) for t in tops) <= 1.0 + 1e-4


def test_return_tokens_as_token_ids(http, hf_tokenizer):
    full = chat(http, max_tokens=6, ignore_eos=True, temperature=0.0, logprobs=True,
                top_logprobs=2, return_tokens_as_token_ids=True)
    content = full["choices"][0]["logprobs"]["content"]
    ids = [int(e["token"].removeprefix("token_id:")) for e in content]
    assert all(e["token"].startswith("token_id:") for e in content)
    assert hf_tokenizer.decode(ids, skip_special_tokens=True) == \
        full["choices"][0]["message"]["content"]
    assert all(t["token"].startswith("token_id:") for e in content for t in e["top_logprobs"])


def test_n_choices_use_seed_plus_index(http):
    body = dict(max_tokens=16, ignore_eos=True, temperature=1.0)
    full = chat(http, n=3, seed=77, **body)
    assert [c["index"] for c in full["choices"]] == [0, 1, 2]
    for i, choice in enumerate(full["choices"]):
        single = chat(http, seed=77 + i, **body)["choices"][0]["message"]["content"]
        assert choice["message"]["content"] == single
    assert full["usage"]["completion_tokens"] == 3 * 16
    streamed = chat_stream(http, n=3, seed=77, **body)
    for i, choice in enumerate(full["choices"]):
        assert streamed_choice(streamed, i)[0] == choice["message"]["content"]


@pytest.mark.parametrize("stream", [False, True])
def test_stop_strings_cut_the_text(http, stream):
    body = dict(max_tokens=40, ignore_eos=True, temperature=0.0)
    # The first call leaves every full prompt page in the prefix cache, so the reference (second call)
    # and the stop request run the same prefill chunks: a cold reference could differ in the last
    # float bits and flip a near-tie of this random model's greedy choice.
    chat(http, **body)
    reference = chat(http, **body)["choices"][0]["message"]["content"]
    words = [w for w in reference[8:].split() if len(w) >= 3]
    assert words, reference
    stop = words[0]
    expected = reference[:reference.index(stop)]
    if stream:
        text, finish, _ = streamed_choice(chat_stream(http, stop=[stop, "\x00never"], **body))
    else:
        choice = chat(http, stop=stop, **body)["choices"][0]
        text, finish = choice["message"]["content"], choice["finish_reason"]
        assert choice["stop_reason"] == stop
    assert (text, finish) == (expected, "stop")


def test_logit_bias_forces_a_token(http):
    forced = 300
    full = chat(http, max_tokens=5, ignore_eos=True, temperature=0.0, logprobs=True,
                return_tokens_as_token_ids=True, logit_bias={str(forced): 100})
    tokens = [e["token"] for e in full["choices"][0]["logprobs"]["content"]]
    assert tokens == [f"token_id:{forced}"] * 5


def test_openai_sdk_chat(server):
    client = server.openai()
    full = client.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, max_tokens=10,
                                          temperature=0)
    stream = client.chat.completions.create(model=SERVED_NAME, messages=MESSAGES, max_tokens=10,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    text, usage = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage
    assert text == full.choices[0].message.content
    assert usage.completion_tokens == full.usage.completion_tokens
    assert usage.prompt_tokens == full.usage.prompt_tokens


@pytest.mark.parametrize("name", [SERVED_NAME, os.path.basename(MODEL_DIR), MODEL_DIR, None])
def test_served_name_and_model_dir_are_accepted(http, name):
    body = {"messages": MESSAGES, "max_tokens": 2}
    if name is not None:
        body["model"] = name
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["model"] == SERVED_NAME


def test_omitted_sampling_fields_use_generation_config_defaults(http):
    with open(os.path.join(MODEL_DIR, "generation_config.json")) as f:
        gen = json.load(f)
    body = dict(max_tokens=24, ignore_eos=True, seed=4242)
    implicit = chat(http, **body)["choices"][0]["message"]["content"]
    explicit = chat(http, temperature=gen.get("temperature", 1.0), top_p=gen.get("top_p", 1.0),
                    **body)["choices"][0]["message"]["content"]
    assert implicit == explicit
