"""Tool calls and reasoning from /v1/chat/completions over real HTTP, on a real engine whose
checkpoint speaks a fixed script (scripted_model.py) chosen per request with logit_bias; its chat
template is Qwen3's, so the server picks the Hermes tool parser and the <think> parser itself."""

from __future__ import annotations

import json
import os

import pytest
from scripted_model import write_scripted_checkpoint
from serving_harness import MODEL_DIR, RunningServer, engine_config, hf_chat_ids, sse_chunks

from dgjax.serving.protocol import ModelDefaults, parse_chat_request
from dgjax.serving.tool_output import OutputParsing
from dgjax.text.tokenizer import Tokenizer

TEMPLATE = os.path.join(os.path.dirname(__file__), "..", "text", "templates", "qwen3_style.jinja")
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object",
                                                                     "properties": {}}}}]
MESSAGES = [{"role": "user", "content": "What's the weather in Paris?"}]
REASONING = "The user wants the weather in Paris."
CONTENT = "Let me check."
CALLS = [("get_weather", {"city": "Paris", "days": 3}), ("now", {})]


def hermes(name: str, args: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


TEXTS = {
    "calls": f"<think>\n{REASONING}\n</think>\n\n{CONTENT}\n" +
             "\n".join(hermes(*c) for c in CALLS),
    "plain": "The answer is 4, not a <tool or a <tool_call without an end.",
    "malformed": 'I will try.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n'
                 "</tool_call>",
    "unterminated": "Calling.\n" + hermes("now", {})[:-len("</tool_call>")],
    "thought_only": f"<think>\nMaybe {hermes('now', {})} is needed.\n</think>\n\nNo tools needed.",
}


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    ckpt = str(tmp_path_factory.mktemp("scripted"))
    with open(TEMPLATE, encoding="utf-8") as f:
        template = f.read()
    scripts = write_scripted_checkpoint(MODEL_DIR, ckpt, TEXTS, template)
    # one decode width and one prefill chunk: the fewest compiles (each costs seconds on CPU)
    server = RunningServer(engine_config(max_concurrency=2, decode_buckets=(2,),
                                         prefill_buckets=(128,)), model_dir=ckpt)
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


def stream(server, script: str, **extra) -> tuple[dict, list[dict]]:
    """The streamed choice reassembled into message form, and the raw chunks."""
    r = server.http.post("/v1/chat/completions", json=body(server, script, stream=True, **extra))
    assert r.status_code == 200, r.text
    chunks = sse_chunks(r)
    msg = {"content": "", "reasoning_content": None, "tool_calls": []}
    finish, logprobs = None, []
    for c in chunks:
        for ch in c["choices"]:
            delta = ch["delta"]
            msg["content"] += delta.get("content") or ""
            if delta.get("reasoning_content"):
                msg["reasoning_content"] = (msg["reasoning_content"] or "") + \
                    delta["reasoning_content"]
            for tc in delta.get("tool_calls", []):
                if tc["index"] == len(msg["tool_calls"]):
                    assert set(tc) == {"index", "id", "type", "function"}
                    msg["tool_calls"].append({"id": tc["id"], "type": tc["type"],
                                              "function": dict(tc["function"])})
                else:
                    assert set(tc) == {"index", "function"}
                    msg["tool_calls"][tc["index"]]["function"]["arguments"] += \
                        tc["function"]["arguments"]
            finish = ch["finish_reason"] or finish
            logprobs += (ch.get("logprobs") or {}).get("content") or []
    return {"message": msg, "finish_reason": finish, "logprobs": logprobs}, chunks


def calls_of(message: dict) -> list[tuple[str, dict]]:
    out = []
    for c in message["tool_calls"]:
        assert c["type"] == "function" and c["id"].startswith("call_")
        out.append((c["function"]["name"], json.loads(c["function"]["arguments"])))
    return out


def comparable(choice: dict) -> dict:
    """A choice without call ids (random per response) and with content '' for null."""
    m = choice["message"]
    return {"content": m["content"] or "", "reasoning_content": m.get("reasoning_content"),
            "calls": [(c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]],
            "finish_reason": choice["finish_reason"]}


def test_reasoning_content_and_parallel_calls_non_streaming(scripted):
    choice = complete(scripted, "calls", logprobs=True)
    m = choice["message"]
    assert (m["reasoning_content"], m["content"], calls_of(m)) == (REASONING, CONTENT, CALLS)
    assert choice["finish_reason"] == "tool_calls"
    assert len({c["id"] for c in m["tool_calls"]}) == len(CALLS)
    # logprobs still cover every generated token, in the model's raw text
    tokens = [e["token"] for e in choice["logprobs"]["content"]]
    assert "".join(tokens[:len(scripted.script_ids["calls"])]) == TEXTS["calls"]


@pytest.mark.parametrize("script", sorted(TEXTS))
def test_streaming_gives_the_same_message_as_non_streaming(scripted, script):
    full = complete(scripted, script, logprobs=True)
    streamed, chunks = stream(scripted, script, logprobs=True)
    assert comparable(streamed) == comparable(full)
    assert len(streamed["logprobs"]) == len(full["logprobs"]["content"])
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)


def test_calls_stream_as_a_header_then_their_arguments(scripted):
    streamed, chunks = stream(scripted, "calls")
    call_deltas = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks
                   if "tool_calls" in c["choices"][0]["delta"]]
    for k, (name, args) in enumerate(CALLS):
        header, arguments = call_deltas[2 * k], call_deltas[2 * k + 1]
        assert header["index"] == arguments["index"] == k
        assert header["function"] == {"name": name, "arguments": ""}
        assert json.loads(arguments["function"]["arguments"]) == args
    assert streamed["finish_reason"] == "tool_calls"
    # no chunk ever carried a piece of markup as content
    assert all("<" not in (c["choices"][0]["delta"].get("content") or "") for c in chunks)
    # while the markup is held back no empty deltas are sent (OpenAI never sends `delta: {}` mid-stream)
    assert all(c["choices"][0]["delta"] or c["choices"][0]["finish_reason"] for c in chunks if c["choices"])


def test_parallel_tool_calls_false_keeps_the_first(scripted):
    full = complete(scripted, "calls", parallel_tool_calls=False)
    streamed, _ = stream(scripted, "calls", parallel_tool_calls=False)
    assert calls_of(full["message"]) == calls_of(streamed["message"]) == CALLS[:1]


@pytest.mark.parametrize("extra", [{"tool_choice": "none"}, {"tools": None}])
def test_without_tool_parsing_the_markup_is_content(scripted, extra):
    full = complete(scripted, "calls", **extra)
    answer = TEXTS["calls"].split("</think>")[1].lstrip()
    assert full["message"]["content"] == answer and full["message"]["tool_calls"] == []
    assert full["message"]["reasoning_content"] == REASONING
    assert full["finish_reason"] == "stop"


@pytest.mark.parametrize("script", ["plain", "malformed", "unterminated"])
def test_text_that_is_not_a_complete_call_is_returned_as_content(scripted, script):
    full = complete(scripted, script)
    assert full["message"]["content"] == TEXTS[script]
    assert full["message"]["tool_calls"] == [] and full["finish_reason"] == "stop"


def test_tool_markup_inside_reasoning_is_not_a_call(scripted):
    m = complete(scripted, "thought_only")["message"]
    assert m["tool_calls"] == [] and m["content"] == "No tools needed."
    assert m["reasoning_content"] == f"Maybe {hermes('now', {})} is needed."


def test_returned_calls_and_tool_results_render_into_the_next_prompt(scripted):
    from transformers import AutoTokenizer

    m = complete(scripted, "calls")["message"]
    turn = {"role": "assistant", "content": m["content"], "tool_calls": m["tool_calls"],
            "reasoning_content": m["reasoning_content"]}
    results = [{"role": "tool", "tool_call_id": c["id"], "content": f"result {k}"}
               for k, c in enumerate(m["tool_calls"])]
    r = scripted.http.post("/v1/chat/completions", json={
        **body(scripted, "plain"), "messages": [*MESSAGES, turn, *results], "max_tokens": 1})
    assert r.status_code == 200, r.text
    hf_turn = {**turn, "tool_calls": [{**c, "function": {**c["function"], "arguments": json.loads(
        c["function"]["arguments"])}} for c in m["tool_calls"]]}
    hf = AutoTokenizer.from_pretrained(scripted.model_dir)
    expected = hf_chat_ids(hf, [*MESSAGES, hf_turn, *results], tools=TOOLS)
    assert r.json()["usage"]["prompt_tokens"] == len(expected)
    text = hf.decode(expected)
    assert all(hermes(n, a) in text for n, a in CALLS) and "result 1" in text


def test_openai_sdk_reads_calls_whole_and_streamed(scripted):
    client = scripted.openai()
    kwargs = dict(model="dgjax-test", messages=MESSAGES, tools=TOOLS, temperature=0,
                  logit_bias={str(scripted.script_ids["calls"][0]): 10})
    full = client.chat.completions.create(**kwargs)
    msg = full.choices[0].message
    assert full.choices[0].finish_reason == "tool_calls"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls] == CALLS
    assert msg.content == CONTENT and msg.reasoning_content == REASONING
    with client.chat.completions.stream(**kwargs) as s:
        final = s.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert [(c.function.name, c.function.arguments) for c in calls] == \
        [(c.function.name, c.function.arguments) for c in msg.tool_calls]
    assert final.choices[0].message.content == CONTENT


def chat_request(raw: dict):
    return parse_chat_request({"messages": MESSAGES, **raw}, 2048, ModelDefaults())


def test_markup_made_of_special_tokens_turns_skip_special_tokens_off(tiny_tokenizer):
    """GLM's <tool_call> is a special token: the parser must see it, as vLLM's GLM parser does."""
    tok = Tokenizer(tiny_tokenizer.backend, chat_template="<arg_key>{{ messages }}")
    tok.backend.add_special_tokens(["<tool_call>", "</tool_call>"])
    parsing = OutputParsing.from_tokenizer(tok)
    assert parsing.tool_format.name == "glm45" and parsing.reasoning is None
    with_tools = chat_request({"tools": TOOLS})
    parsing.for_request(with_tools, [1, 2, 3], tok)
    assert with_tools.common.params.skip_special_tokens is False
    without = chat_request({"tools": TOOLS, "tool_choice": "none"})
    parsing.for_request(without, [1, 2, 3], tok)
    assert without.common.params.skip_special_tokens is True


def test_flags_override_or_disable_the_parsers(tiny_tokenizer):
    from dgjax.serve import build_parser
    from dgjax.serving.options import serving_options_from_args

    args = build_parser().parse_args(["--tool-call-parser", "deepseek_v31", "--reasoning-parser",
                                      "deepseek_r1", "--enable-auto-tool-choice"])
    options = serving_options_from_args(args)
    parsing = OutputParsing.from_tokenizer(tiny_tokenizer, options.tool_call_parser,
                                           options.reasoning_parser)
    assert parsing.tool_format.name == "deepseek_v31" and parsing.reasoning is not None
    off = OutputParsing.from_tokenizer(tiny_tokenizer, "none", "none")
    choice = off.for_request(chat_request({"tools": TOOLS}), [1], tiny_tokenizer).choice()
    assert choice.message(TEXTS["calls"])["content"] == TEXTS["calls"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--tool-call-parser", "nope"])


@pytest.fixture
def tiny_tokenizer():
    return Tokenizer.from_dir(MODEL_DIR)
