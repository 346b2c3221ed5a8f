"""Round trips through real tokenizers and chat templates: past tool calls and tool results rendered
into the prompt in the family's own format, read back by the parser the template selects, streamed
token by token as the server would see them."""

from __future__ import annotations

import os

import pytest
from text_fixtures import TEMPLATES_DIR, TINY_CHAT_DIR, deepseek_dir, load_ours, qwen_dir
from tool_call_checks import (calls_of, render_deepseek_v3, render_deepseek_v31, render_glm,
                              render_hermes, render_qwen3_coder, stream)

from dgjax.serving.tool_output import encode_chat_prompt
from dgjax.text.chat_template import ChatTemplateError
from dgjax.text.detokenizer import IncrementalDetokenizer
from dgjax.text.reasoning import ReasoningParser
from dgjax.text.tool_parsers import (detect_tool_call_format, get_tool_call_format,
                                     resolve_tool_call_format, tool_parser_choices)

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "fields": {"type": "array", "items": {"type": "string"}}}}}}]
CALLS = [("get_weather", {"city": "Zürich", "days": 2, "metric": True}),
         ("get_weather", {"city": "東京", "days": 1, "fields": ["rain", "wind"]})]
REASONING = "Two cities, so two calls."
CONTENT = "Checking both cities."
RESULTS = ["21 °C, sunny", "18 °C, rain"]


def conversation() -> list[dict]:
    """As the server hands it to the template: arguments already decoded into objects."""
    calls = [{"id": f"call_{k}", "type": "function", "function": {"name": n, "arguments": a}}
             for k, (n, a) in enumerate(CALLS)]
    return [{"role": "system", "content": "Use tools."},
            {"role": "user", "content": "Weather in Zürich and Tokyo?"},
            {"role": "assistant", "content": CONTENT, "reasoning_content": REASONING,
             "tool_calls": calls},
            *[{"role": "tool", "tool_call_id": f"call_{k}", "content": r}
              for k, r in enumerate(RESULTS)]]


def template_file(name: str) -> str:
    with open(os.path.join(TEMPLATES_DIR, name), encoding="utf-8") as f:
        return f.read()


# (tokenizer dir, template (None: the tokenizer's own), expected parser, call renderer,
#  assistant turn start, its end, whether the template renders reasoning)
FAMILIES = {
    "tiny-chat": (lambda: TINY_CHAT_DIR, None, "hermes", render_hermes,
                  "<|im_start|>assistant\n", "<|im_end|>", False),
    "qwen3": (qwen_dir, "qwen3_style.jinja", "hermes", render_hermes,
              "<|im_start|>assistant\n", "<|im_end|>", True),
    "qwen3_coder": (qwen_dir, "qwen3_coder_style.jinja", "qwen3_coder", render_qwen3_coder,
                    "<|im_start|>assistant\n", "<|im_end|>", False),
    "glm45": (qwen_dir, "glm45_style.jinja", "glm45", render_glm,
              "<|assistant|>", "<|observation|>", True),
    "deepseek_v3": (deepseek_dir, None, "deepseek_v3", render_deepseek_v3,
                    "<｜Assistant｜>", "<｜end▁of▁sentence｜>", False),
    "deepseek_v31": (deepseek_dir, "deepseek_v31_style.jinja", "deepseek_v31",
                     render_deepseek_v31, "<｜Assistant｜></think>", "<｜end▁of▁sentence｜>", False),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_rendered_calls_parse_back_into_the_same_calls(family):
    model_dir, template_name, parser, render, begin, end, has_reasoning = FAMILIES[family]
    tok = load_ours(model_dir())
    template = template_file(template_name) if template_name else tok.chat_template
    assert detect_tool_call_format(template) == parser
    ids = encode_chat_prompt(tok, conversation(), False, TOOLS, chat_template=template)
    text = tok.decode(ids, skip_special_tokens=False)
    for name, args in CALLS:
        assert render(name, args) in text
    assert all(result in text for result in RESULTS)

    turn_ids = tok.encode(text[text.index(begin) + len(begin):].split(end)[0],
                          add_special_tokens=False)
    turn = tok.decode(turn_ids, skip_special_tokens=False)
    reasoning, rest = ReasoningParser().parse(turn)
    assert reasoning == (REASONING if has_reasoning else None)
    fmt = resolve_tool_call_format("auto", template)
    content, calls = fmt.parse(rest, TOOLS)
    assert (content, calls_of(calls)) == (CONTENT, CALLS)

    # token by token, as the engine's detokenizer releases the text
    detok = IncrementalDetokenizer(tok, skip_special_tokens=False)
    pieces = [detok.add(i) for i in turn_ids] + [detok.flush()]
    assert "".join(pieces) == turn
    r = ReasoningParser().stream()
    answer = [r.feed(p)[1] for p in pieces] + [r.finish()[1]]
    streamed_content, streamed_calls = stream(fmt, answer, TOOLS)
    assert streamed_content == CONTENT
    assert [(n, a) for _, n, a in streamed_calls] == [(c.name, c.arguments) for c in calls]


@pytest.mark.parametrize("template_name", [None, "deepseek_v31_style.jinja"])
def test_templates_that_concatenate_arguments_get_json_text(template_name):
    """DeepSeek templates add `arguments` to strings: objects fail there, so the server falls
    back to the JSON text (transformers itself would fail on these messages)."""
    tok = load_ours(deepseek_dir())
    template = template_file(template_name) if template_name else tok.chat_template
    with pytest.raises(ChatTemplateError):
        tok.encode_chat(conversation(), False, TOOLS, chat_template=template)
    ids = encode_chat_prompt(tok, conversation(), False, TOOLS, chat_template=template)
    assert '{"city": "Zürich", "days": 2, "metric": true}' in tok.decode(ids)


def test_a_template_error_unrelated_to_arguments_is_still_raised():
    tok = load_ours(TINY_CHAT_DIR)
    bad = [*conversation(), {"role": "system", "content": "late system message"}]
    with pytest.raises(ChatTemplateError, match="System messages"):
        encode_chat_prompt(tok, bad, False, TOOLS)


def test_the_flag_overrides_detection():
    hermes_template = load_ours(TINY_CHAT_DIR).chat_template
    assert resolve_tool_call_format("glm45", hermes_template).name == "glm45"
    assert resolve_tool_call_format("none", hermes_template) is None
    assert resolve_tool_call_format("auto", "{{ messages }}") is None
    assert resolve_tool_call_format("auto", None) is None
    with pytest.raises(ValueError, match="unknown tool-call parser"):
        get_tool_call_format("mistral")
    assert {"auto", "none", "hermes", "qwen3_coder", "glm45", "glm47", "deepseek_v3",
            "deepseek_v31"} <= set(tool_parser_choices())
