"""Tool-call grammars with the real tokenizers, driven by random models: what comes out is always a
well-formed call in the family's format (read back by the server's own tool parsers), naming a
declared tool, with arguments valid for its schema or input matching its custom grammar."""

from __future__ import annotations

import json
import re

import pytest
from structured_fixtures import (accepts, continue_generation, generate, replay_allowed, tiny_lm,
                                 tokenizer_and_backend, validator)

from dgjax.structured.tool_formats import DEEPSEEK_V3, HERMES, split_hermes_custom_call
from dgjax.structured.tool_grammar import (AnswerSpec, CustomTool, FunctionTool, ToolGrammarError,
                                           tool_call_grammar)
from dgjax.text.tool_parsers import DeepSeekToolCallFormat, HermesToolCallFormat

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 8},
    "unit": {"enum": ["c", "f"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "unit"]}
LOOKUP = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["id"], "additionalProperties": False}
FUNCTIONS = [FunctionTool("get_weather", WEATHER, strict=True),
             FunctionTool("lookup", LOOKUP, strict=False)]
# The custom tools' languages, as Python regexes (the independent reference).
CALC_LARK = 'start: NUM (OP NUM){0,3}\nNUM: /[0-9]{1,3}/\nOP: "+" | "*"'
CALC_RE = r"[0-9]{1,3}([+*][0-9]{1,3}){0,3}"
CODE_RE = r"[a-z]{2,4}-[0-9]{1,2}"
CUSTOM = [CustomTool("calc", "lark", CALC_LARK), CustomTool("code", "regex", CODE_RE)]
OPENAI_TOOLS = [{"type": "function", "function": {"name": t.name, "parameters": t.parameters}}
                for t in FUNCTIONS]
SEEDS = range(20)


def _check_function_call(name: str, args: dict) -> None:
    tool = next(t for t in FUNCTIONS if t.name == name)
    assert validator(tool.parameters).is_valid(args), (name, args)
    if tool.strict:  # strict closes the object: only declared properties
        assert set(args) <= set(tool.parameters["properties"]), args


def _hermes_blocks(text: str) -> list[str]:
    blocks = re.findall(r"<tool_call>\n(.*?)\n</tool_call>", text, re.DOTALL)
    assert "".join(f"<tool_call>\n{b}\n</tool_call>" for b in blocks) == text.replace(
        "</tool_call>\n<tool_call>", "</tool_call><tool_call>"), text
    return blocks


def test_required_hermes_calls_are_well_formed_and_valid():
    """Parallel calls: a random model may keep calling until max_tokens; every finished call
    must still be right."""
    tok, backend = tokenizer_and_backend("qwen")
    grammar = tool_call_grammar(HERMES, FUNCTIONS + CUSTOM, mode="required")
    seen = set()
    for seed in SEEDS:
        ids, ended = generate(backend, grammar, tiny_lm(backend.vocab_size, seed % 4), seed)
        assert replay_allowed(backend, grammar, ids, complete=ended), seed
        text = tok.decode(ids, skip_special_tokens=False)
        if not ended:
            text = text[: text.rindex("</tool_call>") + len("</tool_call>")]
        for body in _hermes_blocks(text):
            custom = split_hermes_custom_call(body)
            if custom is not None:
                name, raw = custom
                assert re.fullmatch(CALC_RE if name == "calc" else CODE_RE, raw), (name, raw)
            else:
                call = json.loads(body)
                assert set(call) == {"name", "arguments"}
                _check_function_call(call["name"], call["arguments"])
                name = call["name"]
            seen.add(name)
        if all(split_hermes_custom_call(b) is None for b in _hermes_blocks(text)):
            content, calls = HermesToolCallFormat().parse(text, OPENAI_TOOLS)
            assert content == "" and len(calls) == len(_hermes_blocks(text))
    assert len(seen) >= 3, seen  # the random models reach most tools


def test_named_tool_forces_exactly_one_call_of_that_tool():
    tok, backend = tokenizer_and_backend("qwen")
    grammar = tool_call_grammar(HERMES, [FUNCTIONS[1]], mode="required", parallel=False)
    for seed in range(6):
        ids, ended = generate(backend, grammar, tiny_lm(backend.vocab_size, seed % 4), seed)
        assert ended
        content, calls = HermesToolCallFormat().parse(tok.decode(ids, skip_special_tokens=False),
                                                      OPENAI_TOOLS)
        assert content == "" and [c.name for c in calls] == ["lookup"]
        _check_function_call("lookup", json.loads(calls[0].arguments))


def test_auto_mode_is_free_text_until_the_trigger_then_a_valid_call():
    tok, backend = tokenizer_and_backend("qwen")
    grammar = tool_call_grammar(HERMES, FUNCTIONS, mode="auto", parallel=False)
    assert accepts(backend, grammar, "No tool is needed: it is sunny in <b>Paris</b>.")
    assert not accepts(backend, grammar, 'Checking. <tool_call>\n{"name": "nope"')
    prefix = "Let me check the weather. <tool_call>"
    for seed in range(8):
        matcher = backend.matcher(grammar)
        head = backend.ll_tokenizer.tokenize_str(prefix)
        assert matcher.consume_tokens(head)
        rest, ended = continue_generation(backend, matcher, tiny_lm(backend.vocab_size, seed % 4),
                                          seed)
        assert ended
        text = tok.decode(head + rest, skip_special_tokens=False)
        content, calls = HermesToolCallFormat().parse(text, OPENAI_TOOLS)
        assert content == "Let me check the weather." and len(calls) == 1, text
        for call in calls:
            _check_function_call(call.name, json.loads(call.arguments))


def test_tools_with_response_format_yield_a_call_or_the_json_answer():
    tok, backend = tokenizer_and_backend("qwen")
    answer = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    grammar = tool_call_grammar(HERMES, FUNCTIONS, mode="auto", answer=AnswerSpec(answer, True))
    assert not accepts(backend, grammar, "Just text.")
    kinds = set()
    for seed in SEEDS:
        ids, ended = generate(backend, grammar, tiny_lm(backend.vocab_size, seed % 4), seed)
        assert ended
        text = tok.decode(ids, skip_special_tokens=False)
        if text.startswith("<tool_call>"):
            content, calls = HermesToolCallFormat().parse(text, OPENAI_TOOLS)
            assert content == "" and calls
            kinds.add("call")
        else:
            assert validator(answer).is_valid(json.loads(text)) and set(json.loads(text)) == {"ok"}
            kinds.add("answer")
    assert kinds == {"call", "answer"}


def test_deepseek_markers_are_its_special_tokens_and_calls_parse():
    tok, backend = tokenizer_and_backend("deepseek")
    special = backend.special_token_ids(DEEPSEEK_V3.markers)
    assert set(special) == set(DEEPSEEK_V3.markers)
    grammar = tool_call_grammar(DEEPSEEK_V3, FUNCTIONS + CUSTOM[:1], mode="required",
                                special_ids=special)
    for seed in range(10):
        ids, ended = generate(backend, grammar, tiny_lm(backend.vocab_size, seed % 4), seed)
        assert ended
        assert ids[0] == special["<｜tool▁calls▁begin｜>"] and ids[-1] == special["<｜tool▁calls▁end｜>"]
        text = tok.decode(ids, skip_special_tokens=False)
        customs = re.findall(r"custom<｜tool▁sep｜>calc\n```\n(.*?)\n```", text, re.DOTALL)
        for raw in customs:
            assert re.fullmatch(CALC_RE, raw), raw
        if not customs:
            content, calls = DeepSeekToolCallFormat().parse(text, OPENAI_TOOLS)
            assert content == "" and calls
            for call in calls:
                _check_function_call(call.name, json.loads(call.arguments))


def test_a_broken_custom_grammar_is_reported_with_its_tool_index():
    with pytest.raises(ToolGrammarError) as info:
        tool_call_grammar(HERMES, [FUNCTIONS[0], CustomTool("bad", "lark", "start: UNDEFINED_RULE")],
                          mode="required")
    assert info.value.tool == 1
