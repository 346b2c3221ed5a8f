"""OpenAI custom tools and constrained XML-style tool calls over real HTTP, on a real engine whose
checkpoint speaks a fixed script (scripted_model.py, picked per request with logit_bias) under a
Qwen3-Coder-style chat template, so the server reads Qwen3-Coder `<function=...>` markup itself:
custom calls come back as `{"type": "custom", "custom": {"name", "input"}}` whole and streamed
(and through the openai SDK), past custom calls render into the next prompt as the model's text,
and `tool_choice` "required" / named with strict tools is enforced in this format."""

from __future__ import annotations

import json
import os

import pytest
from jsonschema import Draft202012Validator
from scripted_model import write_scripted_checkpoint
from serving_harness import MODEL_DIR, RunningServer, engine_config, hf_chat_ids, sse_chunks

TEMPLATE = os.path.join(os.path.dirname(__file__), "..", "text", "templates",
                        "qwen3_coder_style.jinja")
RAW = 'print("hi </b>")\n\n  2 * (3 + 4)'
BOOK = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 6},
    "nights": {"type": "integer", "minimum": 1, "maximum": 9},
    "late": {"type": ["boolean", "null"]}}, "required": ["city", "nights", "late"],
    "additionalProperties": False}
# not strict: no grammar, so the script's pieces (not the tokenizer's own tokenization, which
# llguidance expects for text a grammar forces) pass unchanged
TOOLS = [{"type": "custom", "custom": {"name": "run_code", "description": "Run Python."}},
         {"type": "function", "function": {"name": "book", "parameters": BOOK}}]
STRICT_BOOK = {"type": "function", "function": {"name": "book", "strict": True, "parameters": BOOK}}
MESSAGES = [{"role": "user", "content": "Compute 2 * 7."}]
CONTENT = "Running it."
CUSTOM_CALL = f"<tool_call>\n<function=run_code>\n{RAW}\n</function>\n</tool_call>"
BOOK_CALL = ("<tool_call>\n<function=book>\n<parameter=city>\nRome\n</parameter>\n"
             "<parameter=nights>\n2\n</parameter>\n<parameter=late>\nnull\n</parameter>\n"
             "</function>\n</tool_call>")
TEXTS = {"custom": f"{CONTENT}\n{CUSTOM_CALL}", "mixed": f"{CONTENT}\n{CUSTOM_CALL}\n{BOOK_CALL}"}


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    ckpt = str(tmp_path_factory.mktemp("scripted-coder"))
    with open(TEMPLATE, encoding="utf-8") as f:
        template = f.read()
    scripts = write_scripted_checkpoint(MODEL_DIR, ckpt, TEXTS, template)
    server = RunningServer(engine_config(max_concurrency=2, decode_buckets=(2,),
                                         prefill_buckets=(128,), max_model_len=1024,
                                         num_pages=160), model_dir=ckpt)
    server.script_ids = {name: ids for name, (ids, _) in scripts.items()}
    server.model_dir = ckpt
    with server.client() as http:
        server.http = http
        yield server
    server.stop()


def body(server, script: str, **extra) -> dict:
    return {"messages": MESSAGES, "tools": TOOLS, "temperature": 0.0,
            "logit_bias": {str(server.script_ids[script][0]): 10}, **extra}


def complete(server, script: str, **extra) -> dict:
    r = server.http.post("/v1/chat/completions", json=body(server, script, **extra))
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def streamed(server, script: str, **extra) -> tuple[dict, str | None]:
    """The streamed message rebuilt from its deltas (a call's header, then its payload)."""
    r = server.http.post("/v1/chat/completions", json=body(server, script, stream=True, **extra))
    assert r.status_code == 200, r.text
    msg, finish = {"content": "", "tool_calls": []}, None
    for c in sse_chunks(r):
        for ch in c["choices"]:
            msg["content"] += ch["delta"].get("content") or ""
            for tc in ch["delta"].get("tool_calls", []):
                if tc["index"] == len(msg["tool_calls"]):
                    kind = tc["type"]
                    assert set(tc) == {"index", "id", "type", kind}
                    msg["tool_calls"].append({"id": tc["id"], "type": kind, kind: dict(tc[kind])})
                else:
                    call = msg["tool_calls"][tc["index"]]
                    kind = call["type"]
                    field = "input" if kind == "custom" else "arguments"
                    assert set(tc) == {"index", kind} and set(tc[kind]) == {field}
                    call[kind][field] += tc[kind][field]
            finish = ch["finish_reason"] or finish
    return msg, finish


def without_ids(calls: list[dict]) -> list[dict]:
    assert all(c["id"].startswith("call_") for c in calls)
    return [{k: v for k, v in c.items() if k != "id"} for c in calls]


EXPECTED = [{"type": "custom", "custom": {"name": "run_code", "input": RAW}},
            {"type": "function", "function": {"name": "book", "arguments": json.dumps(
                {"city": "Rome", "nights": 2, "late": None})}}]


@pytest.mark.parametrize("script", sorted(TEXTS))
def test_custom_calls_return_in_openai_shape_whole_and_streamed(scripted, script):
    want = EXPECTED[:1] if script == "custom" else EXPECTED
    choice = complete(scripted, script)
    m = choice["message"]
    assert (m["content"], without_ids(m["tool_calls"])) == (CONTENT, want)
    assert choice["finish_reason"] == "tool_calls"
    msg, finish = streamed(scripted, script)
    assert (msg["content"], without_ids(msg["tool_calls"]), finish) == (CONTENT, want,
                                                                         "tool_calls")


def test_a_custom_call_of_an_undeclared_tool_is_content(scripted):
    choice = complete(scripted, "custom", tools=TOOLS[1:])
    assert choice["message"]["content"] == TEXTS["custom"]
    assert choice["message"]["tool_calls"] == []
    assert choice["finish_reason"] == "stop"


def test_past_custom_calls_render_as_the_models_text(scripted):
    from transformers import AutoTokenizer

    m = complete(scripted, "mixed")["message"]
    turn = {"role": "assistant", "content": m["content"], "tool_calls": m["tool_calls"]}
    results = [{"role": "tool", "tool_call_id": c["id"], "content": f"result {k}"}
               for k, c in enumerate(m["tool_calls"])]
    r = scripted.http.post("/v1/chat/completions", json={
        **body(scripted, "custom"), "messages": [*MESSAGES, turn, *results], "max_tokens": 1})
    assert r.status_code == 200, r.text
    # reference: transformers renders the turn with the custom call written out by hand
    book = m["tool_calls"][1]
    hf_turn = {"role": "assistant", "content": f"{CONTENT}\n{CUSTOM_CALL}", "tool_calls": [
        {**book, "function": {"name": "book", "arguments": json.loads(
            book["function"]["arguments"])}}]}
    hf = AutoTokenizer.from_pretrained(scripted.model_dir)
    expected = hf_chat_ids(hf, [*MESSAGES, hf_turn, *results], tools=TOOLS)
    assert r.json()["usage"]["prompt_tokens"] == len(expected)
    assert TEXTS["mixed"] in hf.decode(expected)


def test_a_malformed_past_custom_call_is_a_400(scripted):
    turn = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "call_1", "type": "custom", "custom": {"input": "x"}}]}
    r = scripted.http.post("/v1/chat/completions", json={
        **body(scripted, "custom"), "messages": [*MESSAGES, turn]})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "messages[1].tool_calls[0].custom"


def test_openai_sdk_reads_custom_calls(scripted):
    """Whole and plain-streamed. (The SDK's accumulating `chat.completions.stream` helper, openai
    3.57, only knows function-call deltas and fails on a custom one: not used here.)"""
    client = scripted.openai()
    kwargs = dict(model="dgjax-test", messages=MESSAGES, tools=TOOLS, temperature=0,
                  logit_bias={str(scripted.script_ids["custom"][0]): 10})
    msg = client.chat.completions.create(**kwargs).choices[0].message
    assert [(c.type, c.custom.name, c.custom.input) for c in msg.tool_calls] == \
        [("custom", "run_code", RAW)]
    # plain streaming: the SDK's delta type only names function calls; the custom fields arrive
    deltas = [tc for chunk in client.chat.completions.create(**kwargs, stream=True)
              for ch in chunk.choices for tc in ch.delta.tool_calls or []]
    assert deltas[0].type == "custom"
    assert "".join(tc.model_extra["custom"]["input"] for tc in deltas) == RAW


def _valid_book(call: dict) -> dict:
    assert call["type"] == "function" and call["function"]["name"] == "book"
    args = json.loads(call["function"]["arguments"])
    assert Draft202012Validator(BOOK).is_valid(args), args
    return args


@pytest.mark.parametrize("tool_choice", ["required",
                                         {"type": "function", "function": {"name": "book"}}])
def test_forced_strict_calls_in_the_xml_format_are_valid(scripted, tool_choice):
    """Sampling at random from the allowed tokens: whatever comes out is a valid call."""
    r = scripted.http.post("/v1/chat/completions", json={
        "messages": MESSAGES, "tools": [STRICT_BOOK], "tool_choice": tool_choice,
        "temperature": 1.0, "seed": 3, "n": 2, "max_tokens": 160})
    assert r.status_code == 200, r.text
    for choice in r.json()["choices"]:
        calls = choice["message"]["tool_calls"]
        assert choice["finish_reason"] == "tool_calls" and calls, choice
        assert choice["message"]["content"] is None
        for call in calls:
            _valid_book(call)
