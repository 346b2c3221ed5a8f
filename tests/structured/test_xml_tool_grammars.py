"""Tool-call grammars for the XML-style families (Qwen3-Coder `<parameter=...>`, GLM-4.5
`<arg_key>/<arg_value>`) with the real Qwen tokenizer, driven by random models: every forced output
reads back, with the family's own parser, as calls of declared tools whose arguments validate
against the tool's schema (jsonschema) and survive a round trip through the family's chat
template."""

from __future__ import annotations

import json
import os
import re

import pytest
from structured_fixtures import (accepts, continue_generation, generate, replay_allowed, tiny_lm,
                                 tokenizer_and_backend, validator)

from dgjax.serving.tool_output import encode_chat_prompt
from dgjax.structured.json_schema import SchemaError
from dgjax.structured.tool_formats import GLM45, QWEN3_CODER, detect_format
from dgjax.structured.tool_grammar import CustomTool, FunctionTool, tool_call_grammar
from dgjax.text.tool_parsers import Glm45ToolCallFormat, Qwen3CoderToolCallFormat

TEMPLATES = os.path.join(os.path.dirname(__file__), "..", "text", "templates")
BOOKING = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 8},
    "unit": {"enum": ["c", "f"]},
    "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{2}$"},
    "note": {"type": ["string", "null"], "maxLength": 5},
    "nights": {"type": "integer", "minimum": 1, "maximum": 9},
    "late": {"type": "boolean"},
    "room": {"type": "object", "properties": {"beds": {"type": "integer", "minimum": 1,
                                                       "maximum": 3}},
             "required": ["beds"], "additionalProperties": False},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
}, "required": ["city", "unit", "code", "note", "nights", "room"],
    "additionalProperties": False}
PING = {"type": "object", "properties": {"host": {"const": "db-1"}}, "required": ["host"]}
FUNCTIONS = [FunctionTool("book", BOOKING, strict=True), FunctionTool("ping", PING, strict=False)]
OPENAI_TOOLS = [{"type": "function", "function": {"name": t.name, "parameters": t.parameters}}
                for t in FUNCTIONS] + [{"type": "custom", "custom": {"name": "calc"}}]
CALC = CustomTool("calc", "regex", r"[0-9]{1,3}([+*][0-9]{1,3}){0,2}")
CALC_RE = r"[0-9]{1,3}([+*][0-9]{1,3}){0,2}"
# family -> (grammar format, parser, test template, where the template's assistant turn starts)
FAMILIES = {
    "qwen3_coder": (QWEN3_CODER, Qwen3CoderToolCallFormat(), "qwen3_coder_style.jinja",
                    "<|im_start|>assistant\n"),
    "glm45": (GLM45, Glm45ToolCallFormat(), "glm45_style.jinja", "<|assistant|>"),
}
SEEDS = range(12)


def _forced_text(family: str, grammar: str, seed: int) -> str:
    """The random model's output under `grammar`, cut after its last complete call."""
    tok, backend = tokenizer_and_backend("qwen")
    ids, ended = generate(backend, grammar, tiny_lm(backend.vocab_size, seed % 4), seed)
    assert replay_allowed(backend, grammar, ids, complete=ended), seed
    text = tok.decode(ids, skip_special_tokens=False)
    return text if ended else text[: text.rindex("</tool_call>") + len("</tool_call>")]


def _check_call(call) -> dict:
    tool = next(t for t in FUNCTIONS if t.name == call.name)
    args = json.loads(call.arguments)
    assert validator(tool.parameters).is_valid(args), (call.name, args)
    assert set(args) <= set(tool.parameters["properties"]), args
    return args


def _grammar(family: str, tools, **kwargs) -> str:
    fmt = FAMILIES[family][0]
    _, backend = tokenizer_and_backend("qwen")
    return tool_call_grammar(fmt, tools, special_ids=backend.special_token_ids(fmt.markers),
                             **kwargs)


def _render_call(family: str, name: str, args: dict) -> str:
    """The assistant turn the family's template renders for one call."""
    tok, _ = tokenizer_and_backend("qwen")
    with open(os.path.join(TEMPLATES, FAMILIES[family][2]), encoding="utf-8") as f:
        template = f.read()
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_0", "type": "function",
                     "function": {"name": name, "arguments": args}}]}]
    ids = encode_chat_prompt(tok, messages, False, OPENAI_TOOLS, chat_template=template)
    return tok.decode(ids, skip_special_tokens=False).split(FAMILIES[family][3])[-1]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_required_calls_parse_into_valid_arguments(family):
    _, parser, _, _ = FAMILIES[family]
    grammar = _grammar(family, FUNCTIONS + [CALC], mode="required")
    seen, kinds = set(), set()
    for seed in SEEDS:
        text = _forced_text(family, grammar, seed)
        content, calls = parser.parse(text, OPENAI_TOOLS)
        assert content == "" and len(calls) == text.count("</tool_call>"), text
        for call in calls:
            seen.add(call.name)
            if call.custom_input is not None:
                assert call.name == "calc" and re.fullmatch(CALC_RE, call.custom_input), call
                continue
            args = _check_call(call)
            kinds |= {type(v).__name__ for v in args.values()}
            # the call rendered back through the family's template reads back the same
            _, again = parser.parse(_render_call(family, call.name, args), OPENAI_TOOLS)
            assert [json.loads(c.arguments) for c in again] == [args]
    assert seen == {"book", "ping", "calc"}, seen
    assert {"str", "int", "dict"} <= kinds, kinds  # raw strings and JSON-typed values both occur


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_named_tool_forces_one_call_of_it(family):
    _, parser, _, _ = FAMILIES[family]
    grammar = _grammar(family, FUNCTIONS[:1], mode="required", parallel=False)
    for seed in range(4):
        content, calls = parser.parse(_forced_text(family, grammar, seed), OPENAI_TOOLS)
        assert content == "" and [c.name for c in calls] == ["book"]
        _check_call(calls[0])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_auto_mode_is_free_text_until_the_trigger(family):
    _, parser, _, _ = FAMILIES[family]
    tok, backend = tokenizer_and_backend("qwen")
    grammar = _grammar(family, FUNCTIONS, mode="auto", parallel=False)
    assert accepts(backend, grammar, "No call needed: <b>sunny</b> & 21 °C.")
    prefix = "Let me book it. <tool_call>"
    for seed in range(4):
        matcher = backend.matcher(grammar)
        head = backend.ll_tokenizer.tokenize_str(prefix)
        assert matcher.consume_tokens(head)
        rest, ended = continue_generation(backend, matcher, tiny_lm(backend.vocab_size, seed),
                                          seed)
        assert ended
        content, calls = parser.parse(tok.decode(head + rest, skip_special_tokens=False),
                                      OPENAI_TOOLS)
        assert content == "Let me book it." and len(calls) == 1
        _check_call(calls[0])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_strict_refuses_what_raw_text_cannot_carry(family):
    bad = [{"type": "object", "properties": {"day": {"type": "string", "format": "date"}}},
           {"type": "object", "$defs": {"p": {"type": "object"}},
            "properties": {"p": {"$ref": "#/$defs/p"}}}]
    for schema in bad:
        with pytest.raises(SchemaError) as info:
            _grammar(family, [FunctionTool("f", schema, strict=True)], mode="required")
        assert info.value.path[:1] == ("properties",)
        _grammar(family, [FunctionTool("f", schema, strict=False)], mode="required")


def test_parser_names_pick_the_xml_formats():
    assert detect_format("qwen3_coder", None) is detect_format("qwen3_xml", None) is QWEN3_CODER
    assert detect_format("glm45", None) is detect_format("glm47", None) is GLM45


# family -> a call of f(s=VALUE, n=2) written out, VALUE left to fill in
WRITTEN = {
    "qwen3_coder": ("<tool_call>\n<function=f>\n<parameter=s>\n{}\n</parameter>\n"
                    "<parameter=n>\n2\n</parameter>\n</function>\n</tool_call>"),
    "glm45": ("<tool_call>f\n<arg_key>s</arg_key>\n<arg_value>{}</arg_value>\n"
              "<arg_key>n</arg_key>\n<arg_value>2</arg_value>\n</tool_call>"),
}
CLOSING = {"qwen3_coder": "</parameter>", "glm45": "</arg_value>"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_raw_values_cannot_hold_the_tag_that_ends_them(family):
    _, backend = tokenizer_and_backend("qwen")
    schema = {"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["s", "n"]}
    grammar = _grammar(family, [FunctionTool("f", schema, strict=True)], mode="required",
                       parallel=False)
    for value in ("plain", "<b>tags</b> and {json}", "multi\nline\n", "</tool_call", "<arg_key>"):
        assert accepts(backend, grammar, WRITTEN[family].replace("{}", value)), value
    for value in (f"a{CLOSING[family]}b", CLOSING[family]):
        assert not accepts(backend, grammar, WRITTEN[family].replace("{}", value)), value


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_strict_allows_only_declared_names_with_the_required_ones(family):
    _, backend = tokenizer_and_backend("qwen")
    schema = {"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["s"]}
    grammar = _grammar(family, [FunctionTool("f", schema, strict=True)], mode="required",
                       parallel=False)
    call = WRITTEN[family].replace("{}", "x")
    assert accepts(backend, grammar, call)
    assert not accepts(backend, grammar, call.replace("=n>", "=m>").replace(">n<", ">m<"))
    assert not accepts(backend, grammar, call.replace("=s>", "=t>").replace(">s<", ">t<"))
    assert not accepts(backend, grammar, call.replace("\n2\n", "\ntwo\n").replace(">2<", ">two<"))
