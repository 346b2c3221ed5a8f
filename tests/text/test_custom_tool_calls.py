"""OpenAI custom tools (free-form input) in every tool-call format: the parsers return a declared
custom tool's call with its raw input in OpenAI's shape, whole and streamed character by
character; an undeclared name stays content; past custom calls render through the family's chat
template as the text the model writes, which the parser reads back."""

from __future__ import annotations

import json
import os

import pytest
from text_fixtures import TEMPLATES_DIR, deepseek_dir, load_ours, qwen_dir

from dgjax.serving.custom_tool_calls import inline_custom_tool_calls
from dgjax.serving.tool_output import encode_chat_prompt
from dgjax.structured.tool_formats import detect_format
from dgjax.text.tool_parsers import get_tool_call_format

RAW = 'print("a</b> {x}")\n\n  2 * (3 + 4)\n'  # markup-ish, braces, blank lines, edge newlines
TOOLS = [{"type": "custom", "custom": {"name": "run_code"}},
         {"type": "function", "function": {"name": "ping", "parameters": {
             "type": "object", "properties": {"n": {"type": "integer"}}}}}]
DS = {k: f"<｜{k}｜>" for k in ("tool▁calls▁begin", "tool▁calls▁end",
                               "tool▁call▁begin", "tool▁call▁end", "tool▁sep")}


def _ds(body: str) -> str:
    return (DS["tool▁calls▁begin"] + DS["tool▁call▁begin"] + body + DS["tool▁call▁end"] +
            DS["tool▁calls▁end"])


# parser name -> (the model's text for one custom call, written by hand from each family's docs,
#                 the same text for a function call ping(n=1))
WRITTEN = {
    "hermes": ('<tool_call>\n{"name": "run_code"}\n' + RAW + "\n</tool_call>",
               '<tool_call>\n{"name": "ping", "arguments": {"n": 1}}\n</tool_call>'),
    "qwen3_coder": ("<tool_call>\n<function=run_code>\n" + RAW + "\n</function>\n</tool_call>",
                    "<tool_call>\n<function=ping>\n<parameter=n>\n1\n</parameter>\n</function>\n"
                    "</tool_call>"),
    "glm45": ("<tool_call>run_code\n" + RAW + "</tool_call>",
              "<tool_call>ping\n<arg_key>n</arg_key>\n<arg_value>1</arg_value>\n</tool_call>"),
    "deepseek_v3": (_ds("custom" + DS["tool▁sep"] + "run_code\n```\n" + RAW + "\n```"),
                    _ds("function" + DS["tool▁sep"] + "ping\n```json\n{\"n\": 1}\n```")),
    "deepseek_v31": (_ds("run_code" + DS["tool▁sep"] + RAW),
                     _ds("ping" + DS["tool▁sep"] + '{"n": 1}')),
}


def _streamed(parser_name: str, text: str, tools) -> tuple[str, list[dict]]:
    """Feed one character at a time; rebuild OpenAI tool calls from the deltas, checking their
    shape: a header (index, id, type, name), then the payload only."""
    s = get_tool_call_format(parser_name).stream(tools)
    content, calls = "", []
    for d in [s.feed(ch) for ch in text] + [s.finish()]:
        content += d.content
        for tc in d.tool_calls:
            if tc["index"] == len(calls):
                kind = tc["type"]
                assert set(tc) == {"index", "id", "type", kind}
                calls.append({"id": tc["id"], "type": kind, kind: dict(tc[kind])})
            else:
                call = calls[tc["index"]]
                kind = call["type"]
                assert set(tc) == {"index", kind}
                field = "input" if kind == "custom" else "arguments"
                call[kind][field] += tc[kind][field]
    return content, calls


@pytest.mark.parametrize("parser_name", sorted(WRITTEN))
def test_custom_calls_come_back_in_openai_shape_whole_and_streamed(parser_name):
    custom, function = WRITTEN[parser_name]
    text = "Running it." + ("\n" if parser_name != "deepseek_v3" else "") + custom
    if not parser_name.startswith("deepseek"):
        text += "\n" + function
    content, calls = get_tool_call_format(parser_name).parse(text, TOOLS)
    whole = [c.to_openai() for c in calls]
    assert content == "Running it."
    assert whole[0]["type"] == "custom" and whole[0]["id"].startswith("call_")
    assert whole[0]["custom"] == {"name": "run_code", "input": RAW}
    if not parser_name.startswith("deepseek"):
        assert whole[1]["type"] == "function" and whole[1]["function"]["name"] == "ping"
        assert json.loads(whole[1]["function"]["arguments"]) == {"n": 1}
    streamed_content, streamed = _streamed(parser_name, text, TOOLS)
    assert streamed_content == content
    assert [{k: v for k, v in c.items() if k != "id"} for c in streamed] == \
        [{k: v for k, v in c.items() if k != "id"} for c in whole]


@pytest.mark.parametrize("parser_name", sorted(WRITTEN))
def test_an_undeclared_custom_name_is_not_a_call(parser_name):
    custom, _ = WRITTEN[parser_name]
    only_functions = TOOLS[1:]
    content, calls = get_tool_call_format(parser_name).parse(custom, only_functions)
    assert [c.custom_input for c in calls] == [None] * len(calls)
    if parser_name in ("hermes", "glm45", "qwen3_coder"):  # not well-formed function calls
        assert calls == [] and content == custom


# family -> (tokenizer, template file (None: the tokenizer's own), parser name)
FAMILIES = {
    "qwen3": (qwen_dir, "qwen3_style.jinja", "hermes"),
    "qwen3_coder": (qwen_dir, "qwen3_coder_style.jinja", "qwen3_coder"),
    "glm45": (qwen_dir, "glm45_style.jinja", "glm45"),
    "deepseek_v31": (qwen_dir, "deepseek_v31_style.jinja", "deepseek_v31"),
    "deepseek_v3": (deepseek_dir, None, "deepseek_v3"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_past_custom_calls_render_as_the_models_text(family):
    tok_dir, template_name, parser_name = FAMILIES[family]
    tok = load_ours(tok_dir())
    if template_name:
        with open(os.path.join(TEMPLATES_DIR, template_name), encoding="utf-8") as f:
            template = f.read()
    else:
        template = tok.chat_template
    fmt = detect_format(parser_name, template)
    turn = {"role": "assistant", "content": "Running it.", "tool_calls": [
        {"id": "call_1", "type": "custom", "custom": {"name": "run_code", "input": RAW}}]}
    messages = inline_custom_tool_calls(
        [{"role": "user", "content": "Compute."}, turn,
         {"role": "tool", "tool_call_id": "call_1", "content": "14"}], fmt)
    assert "tool_calls" not in messages[1] and turn["tool_calls"]  # the input is not edited
    ids = encode_chat_prompt(tok, messages, True, TOOLS, chat_template=template)
    text = tok.decode(ids, skip_special_tokens=False)
    assert WRITTEN[parser_name][0] in text
    start = text.index("Running it.")
    assistant = text[start:text.index(WRITTEN[parser_name][0]) + len(WRITTEN[parser_name][0])]
    content, calls = get_tool_call_format(parser_name).parse(assistant, TOOLS)
    assert content == "Running it."
    assert [c.to_openai()["custom"] for c in calls] == [{"name": "run_code", "input": RAW}]
