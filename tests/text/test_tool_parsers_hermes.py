"""Qwen3 / Hermes JSON tool calls: whole outputs and streams agree on every split."""

from __future__ import annotations

import json

import pytest
from tool_call_checks import check_parse
from tool_call_checks import render_hermes as hermes

from dgjax.text.tool_parsers import HermesToolCallFormat

FMT = HermesToolCallFormat()
CALLS = [("get_weather", {"city": "Zürich", "days": 3, "units": {"temp": "C"}}),
         ("search", {"query": "a \"quoted\" <tool_call> word\nand a newline", "top_k": [1, 2.5]}),
         ("now", {})]


def test_content_then_parallel_calls():
    text = "Let me look that up.\n" + "\n".join(hermes(n, a) for n, a in CALLS)
    assert check_parse(FMT, text) == ("Let me look that up.", CALLS)


def test_calls_only_give_empty_content_and_keep_unicode_unescaped():
    text = "\n".join(hermes(n, a) for n, a in CALLS[:1]) + "\n"
    content, calls = FMT.parse(text)
    assert content == "" and calls[0].arguments == json.dumps(CALLS[0][1], ensure_ascii=False)
    assert check_parse(FMT, text) == ("", CALLS[:1])


def test_text_after_calls_stays_content():
    text = "Before.\n\n" + hermes(*CALLS[0]) + "\n\nAfter the call.\n"
    assert check_parse(FMT, text) == ("Before.\n\nAfter the call.\n", CALLS[:1])
    assert check_parse(FMT, hermes(*CALLS[0]) + "\n  tail") == ("tail", CALLS[:1])


@pytest.mark.parametrize("text", [
    "Use a <tool> tag, a < sign, a dangling <tool_ca and a stray </tool_call> here.",
    "ends with a partial marker <tool_c",
    "  leading and trailing whitespace is the model's  \n\n",
    "",
])
def test_text_without_calls_is_returned_unchanged(text):
    assert check_parse(FMT, text) == (text, [])


@pytest.mark.parametrize("bad_block", [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>',  # bad JSON
    '<tool_call>\n{"arguments": {"city": "Paris"}}\n</tool_call>',  # no name
    '<tool_call>\n{"name": "f", "arguments": [1, 2]}\n</tool_call>',  # arguments not an object
    '<tool_call>\n{"name": "f", "arguments": {"x": NaN}}\n</tool_call>',  # not strict JSON
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
    '<tool_call>\n{"name": "f", "arguments": {}}',  # unterminated at the end of output
])
def test_malformed_or_unterminated_calls_are_content(bad_block):
    text = "I will call it.\n" + bad_block
    assert check_parse(FMT, text) == (text, [])
    # after a valid call, the bad block is content and the call survives
    mixed = hermes(*CALLS[0]) + "\n" + bad_block
    assert check_parse(FMT, mixed) == (bad_block, CALLS[:1])


def test_duplicate_argument_keys_keep_the_last_value_like_json_loads():
    raw_args = '{"city": "Paris", "days": 1, "city": "Rome"}'
    text = '<tool_call>\n{"name": "get_weather", "arguments": ' + raw_args + "}\n</tool_call>"
    assert check_parse(FMT, text) == ("", [("get_weather", json.loads(raw_args))])


def test_argument_spellings_models_use():
    missing = '<tool_call>\n{"name": "now"}\n</tool_call>'
    encoded = hermes("get_weather", json.dumps(CALLS[0][1]))
    params = hermes("get_weather", CALLS[0][1], key="parameters")
    assert check_parse(FMT, missing) == ("", [("now", {})])
    assert check_parse(FMT, encoded) == ("", CALLS[:1])
    assert check_parse(FMT, params) == ("", CALLS[:1])


def test_parallel_tool_calls_false_keeps_the_first_call_only():
    text = "On it.\n" + "\n".join(hermes(n, a) for n, a in CALLS) + "\nDone."
    assert check_parse(FMT, text, parallel=False) == ("On it.\nDone.", CALLS[:1])


def test_call_ids_are_unique_and_stream_deltas_are_openai_shaped():
    text = "\n".join(hermes(n, a) for n, a in CALLS)
    s = FMT.stream()
    deltas = s.feed(text).tool_calls + s.finish().tool_calls
    assert deltas[0] == {"index": 0, "id": s.tool_calls[0].id, "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}
    assert deltas[1] == {"index": 0, "function": {"arguments": s.tool_calls[0].arguments}}
    assert len({c.id for c in s.tool_calls}) == len(CALLS)


def test_a_long_call_streamed_in_small_pieces_is_released_once_complete():
    args = {"path": "a.py", "content": "x = 1\n" * 2000}
    text = hermes("write_file", args)
    s = FMT.stream()
    released = [s.feed(text[i:i + 7]) for i in range(0, len(text), 7)]
    assert not any(released[:-1]) and released[-1].tool_calls
    assert json.loads(s.tool_calls[0].arguments) == args
