"""<think> reasoning split from the answer: whole outputs and streams agree on every split, and the
prompt's tail (from real chat templates) says whether the output starts inside the reasoning."""

from __future__ import annotations

import os

import pytest
from text_fixtures import TEMPLATES_DIR, TINY_CHAT_DIR, deepseek_dir, load_ours, qwen_dir

from dgjax.text.reasoning import (ReasoningParser, prompt_opens_reasoning, reasoning_parser_choices,
                                  resolve_reasoning_parser)

PARSER = ReasoningParser()
R = "The user asks for 2+2.\nThat is <b>4</b>; a <tool_call> here is only a thought."
C = "2 + 2 = 4."


def check_parse(text: str, in_reasoning: bool) -> tuple[str | None, str]:
    """PARSER.parse, after checking every single split and character-by-character streaming give
    the same reasoning and content."""
    whole = PARSER.parse(text, in_reasoning)
    for pieces in [[text[:i], text[i:]] for i in range(len(text) + 1)] + [list(text)]:
        s = PARSER.stream(in_reasoning)
        outs = [s.feed(p) for p in pieces] + [s.finish()]
        assert ("".join(r for r, _ in outs), "".join(c for _, c in outs)) == (
            whole[0] or "", whole[1]), pieces
        assert (s.reasoning, s.content) == whole
    return whole


@pytest.mark.parametrize("text,in_reasoning", [
    (f"<think>\n{R}\n</think>\n\n{C}", False),  # Qwen3 hybrid: the model opens the tag
    (f"\n<think>{R}</think>{C}", False),  # GLM style: a newline first, no padding
    (f"{R}\n</think>\n\n{C}", True),  # the prompt ended in <think> (Qwen3 thinking, R1, V3.1)
    (f"<think>\n{R}\n</think>\n\n{C}", True),  # ... and the model repeated the tag anyway
])
def test_reasoning_then_answer(text, in_reasoning):
    assert check_parse(text, in_reasoning) == (R, C)


@pytest.mark.parametrize("text", [C, f"\n\n  {C}\n", f"{C} <think>not a thought</think>",
                                  f"{C}</think>", "<thi", "", "   "])
def test_output_without_reasoning_is_all_content(text):
    assert check_parse(text, False) == (None, text)


def test_truncated_reasoning_stays_reasoning():
    assert check_parse(f"<think>\n{R}\n", False) == (R, "")
    assert check_parse(f"{R}\n</thi", True) == (f"{R}\n</thi", "")
    assert check_parse("", True) == ("", "")


def test_empty_reasoning_block():
    assert check_parse(f"<think>\n\n</think>\n\n{C}", False) == ("", C)
    assert check_parse(f"</think>{C}", True) == ("", C)


def test_only_the_first_closing_tag_ends_reasoning():
    text = f"<think>{R}</think>{C}</think> more"
    assert check_parse(text, False) == (R, f"{C}</think> more")


def render(model_dir: str, template: str | None, **kwargs) -> str:
    tok = load_ours(model_dir)
    if template is not None:
        with open(os.path.join(TEMPLATES_DIR, template), encoding="utf-8") as f:
            kwargs["chat_template"] = f.read()
    return tok.apply_chat_template([{"role": "user", "content": "hi"}], True, **kwargs)


@pytest.mark.parametrize("template,kwargs,opens", [
    ("qwen3_style.jinja", {}, False),  # hybrid thinking: the model writes <think> itself
    ("qwen3_style.jinja", {"enable_thinking": False}, False),  # prompt holds <think></think>
    ("deepseek_v31_style.jinja", {"thinking": True}, True),
    ("deepseek_v31_style.jinja", {"thinking": False}, False),
])
def test_prompt_tail_says_whether_the_output_starts_in_reasoning(template, kwargs, opens):
    model_dir = deepseek_dir() if template.startswith("deepseek") else qwen_dir()
    prompt = render(model_dir, template, **kwargs)
    assert prompt_opens_reasoning(prompt[-40:]) is opens
    assert PARSER.prompt_opens_reasoning(prompt) is opens


def test_parser_selection_from_the_template_and_the_flag():
    with open(os.path.join(TEMPLATES_DIR, "qwen3_style.jinja"), encoding="utf-8") as f:
        qwen3 = f.read()
    assert resolve_reasoning_parser("auto", qwen3) is not None
    assert resolve_reasoning_parser("auto", load_ours(TINY_CHAT_DIR).chat_template) is None
    # DeepSeek-V3's template strips "</think>" from old turns but never opens reasoning
    assert resolve_reasoning_parser("auto", load_ours(deepseek_dir()).chat_template) is None
    assert resolve_reasoning_parser("none", qwen3) is None
    assert resolve_reasoning_parser("deepseek_r1", None) is not None
    with pytest.raises(ValueError, match="unknown reasoning parser"):
        resolve_reasoning_parser("o1", qwen3)
    assert {"auto", "none", "qwen3", "deepseek_r1"} <= set(reasoning_parser_choices())
