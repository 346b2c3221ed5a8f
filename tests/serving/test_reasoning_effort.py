"""`reasoning_effort` -> the chat template's own switches, per template family; unknown values are
400s; templates without a switch accept it and say so; `/v1/models` publishes the mapping.

The family templates below reproduce how each real template reads its switch (Qwen3's is the full
template from tests/text/templates); each is rendered with the mapped variables, so the test sees
the prompt the model would get, not just the mapping table."""

from __future__ import annotations

import pytest

from agent_server import AGENT_NAME, QWEN3_TEMPLATE
from dgjax.serving.errors import APIError
from dgjax.serving.reasoning_effort import (EFFORT_LEVELS, HEADER, ReasoningControls,
                                            UnsupportedEffort, apply_reasoning_effort)
from dgjax.text.chat_template import render_chat_template
from serving_harness import hf_chat_ids, sse_chunks

with open(QWEN3_TEMPLATE, encoding="utf-8") as f:
    QWEN3 = f.read()
# DeepSeek-V3.1: `thinking`, off unless set; the generation prompt opens or closes <think>.
DEEPSEEK_V31 = (
    "{% if not thinking is defined %}{% set thinking = false %}{% endif %}{{ bos_token }}"
    "{% for m in messages %}<｜User｜>{{ m.content }}{% endfor %}"
    "{% if add_generation_prompt %}<｜Assistant｜>{% if thinking %}<think>{% else %}</think>"
    "{% endif %}{% endif %}")
# GLM-4.5/4.6: `enable_thinking`; off appends /nothink and an empty think block.
GLM45 = (
    "[gMASK]<sop>{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}"
    "{{ '/nothink' if (enable_thinking is defined and not enable_thinking) else '' }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>"
    "{{ '\n<think></think>' if (enable_thinking is defined and not enable_thinking) else '' }}"
    "{% endif %}")
# gpt-oss (Harmony): `reasoning_effort` interpolated into the system header, medium by default.
GPT_OSS = (
    "<|start|>system<|message|>{%- if reasoning_effort is not defined %}"
    "{%- set reasoning_effort = \"medium\" %}{%- endif %}"
    "{{- \"Reasoning: \" + reasoning_effort }}<|end|>"
    "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|start|>assistant{% endif %}")
# Kimi-K2.5: `thinking`, on unless explicitly false.
KIMI = ("{% for m in messages %}{{ m.content }}{% endfor %}"
        "{%- if thinking is defined and thinking is false -%}<think></think>{%- endif -%}")
PLAIN = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"

OFF = ("none", "minimal")
MESSAGES = [{"role": "user", "content": "Why is the sky blue?"}]


def expected_prompt_end(family: str, effort: str) -> str:
    off = effort in OFF
    return {
        "qwen3": "<|im_start|>assistant\n" + ("<think>\n\n</think>\n\n" if off else ""),
        "deepseek": "<｜Assistant｜>" + ("</think>" if off else "<think>"),
        "glm": "<|assistant|>" + ("\n<think></think>" if off else ""),
        "gpt-oss": {"none": "low", "minimal": "low", "xhigh": "high"}.get(effort, effort),
        "kimi": "<think></think>" if off else "blue?",
    }[family]


TEMPLATES = {"qwen3": QWEN3, "deepseek": DEEPSEEK_V31, "glm": GLM45, "gpt-oss": GPT_OSS,
             "kimi": KIMI}


@pytest.mark.parametrize("family", list(TEMPLATES))
def test_each_family_gets_its_own_switch(family):
    template = TEMPLATES[family]
    controls = ReasoningControls.from_templates(template)
    assert controls.supported
    for effort in EFFORT_LEVELS:
        kwargs: dict = {}
        headers = apply_reasoning_effort({"reasoning_effort": effort}, kwargs, controls,
                                         UnsupportedEffort.REJECT)
        prompt = render_chat_template(template, MESSAGES, add_generation_prompt=True,
                                      special_tokens={"bos_token": "<s>"}, **kwargs)
        if family == "gpt-oss":
            assert f"Reasoning: {expected_prompt_end(family, effort)}<|end|>" in prompt
        else:
            assert prompt.endswith(expected_prompt_end(family, effort)), (effort, prompt)
        assert headers[HEADER].startswith(effort + "; ")


def test_detected_controls():
    assert ReasoningControls.from_templates(QWEN3) == ReasoningControls(("enable_thinking",), ())
    assert ReasoningControls.from_templates(DEEPSEEK_V31).switches == ("thinking",)
    assert ReasoningControls.from_templates(GPT_OSS) == ReasoningControls(
        (), ("low", "medium", "high"))
    both = ReasoningControls.from_templates(
        "{% if enable_thinking is defined and not enable_thinking %}{% else %}"
        "{% if reasoning_effort not in ['low', 'medium', 'high', 'xhigh'] %}"
        "{% set reasoning_effort = 'medium' %}{% endif %}{{ reasoning_effort }}{% endif %}")
    assert both == ReasoningControls(("enable_thinking",), ("low", "medium", "high", "xhigh"))
    assert both.template_kwargs("none") == {"enable_thinking": False}
    assert both.template_kwargs("xhigh") == {"reasoning_effort": "xhigh", "enable_thinking": True}
    # a message attribute named like a switch is not a switch
    assert not ReasoningControls.from_templates(
        "{% for m in messages %}{{ m.thinking }}{{ m.reasoning_effort }}{% endfor %}").supported
    assert not ReasoningControls.from_templates({"default": PLAIN, "tool_use": PLAIN}).supported
    assert ReasoningControls.from_templates({"default": PLAIN, "tool_use": QWEN3}).supported


def test_template_without_switch_ignores_or_rejects():
    controls = ReasoningControls.from_templates(PLAIN)
    kwargs: dict = {}
    headers = apply_reasoning_effort({"reasoning_effort": "high"}, kwargs, controls,
                                     UnsupportedEffort.IGNORE)
    assert kwargs == {} and "ignored" in headers[HEADER]
    with pytest.raises(APIError) as info:
        apply_reasoning_effort({"reasoning_effort": "high"}, {}, controls, UnsupportedEffort.REJECT)
    assert (info.value.status, info.value.param, info.value.code) == (400, "reasoning_effort",
                                                                      "unsupported")
    assert apply_reasoning_effort({}, kwargs, controls, UnsupportedEffort.REJECT) == {}


@pytest.mark.parametrize("value", ["max", "HIGH", "", 3, True, ["low"]])
def test_unknown_effort_is_a_400_naming_the_field(value):
    with pytest.raises(APIError) as info:
        apply_reasoning_effort({"reasoning_effort": value}, {},
                               ReasoningControls.from_templates(QWEN3), UnsupportedEffort.IGNORE)
    assert (info.value.status, info.value.param, info.value.code) == (400, "reasoning_effort",
                                                                      "invalid_value")


# ---- over HTTP: the agent server renders the Qwen3 template, the main server tiny-chat's ----

@pytest.fixture(scope="module")
def agent_hf_tokenizer(agent_server):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(agent_server.dgjax.ctx.model_dir)


def post(http, **body):
    return http.post("/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 2,
                                                   "temperature": 0.0, **body})


@pytest.mark.parametrize("effort,thinking", [("none", False), ("minimal", False), ("low", True),
                                             ("xhigh", True)])
@pytest.mark.parametrize("stream", [False, True], ids=["full", "stream"])
def test_qwen3_template_gets_enable_thinking(agent_http, agent_hf_tokenizer, effort, thinking,
                                             stream):
    body = {"reasoning_effort": effort}
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    r = post(agent_http, **body)
    assert r.status_code == 200, r.text
    assert r.headers[HEADER] == f"{effort}; enable_thinking={'true' if thinking else 'false'}"
    usage = sse_chunks(r)[-1]["usage"] if stream else r.json()["usage"]
    assert usage["prompt_tokens"] == len(
        hf_chat_ids(agent_hf_tokenizer, MESSAGES, enable_thinking=thinking))


def test_explicit_chat_template_kwargs_win(agent_http, agent_hf_tokenizer):
    r = post(agent_http, reasoning_effort="none", chat_template_kwargs={"enable_thinking": True})
    assert r.status_code == 200, r.text
    assert r.headers[HEADER] == "none; enable_thinking=true"
    assert r.json()["usage"]["prompt_tokens"] == len(
        hf_chat_ids(agent_hf_tokenizer, MESSAGES, enable_thinking=True))
    r = post(agent_http, chat_template_kwargs={"enable_thinking": False})
    assert HEADER not in r.headers
    assert r.json()["usage"]["prompt_tokens"] == len(
        hf_chat_ids(agent_hf_tokenizer, MESSAGES, enable_thinking=False))


def test_template_without_switch_accepts_and_reports(http, hf_tokenizer):
    r = post(http, reasoning_effort="high")
    assert r.status_code == 200, r.text
    assert "ignored" in r.headers[HEADER]
    assert r.json()["usage"]["prompt_tokens"] == len(hf_chat_ids(hf_tokenizer, MESSAGES))
    r = post(http, reasoning_effort="maximum")
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "reasoning_effort"


def test_openai_sdk_reasoning_effort(agent_server):
    out = agent_server.openai().chat.completions.with_raw_response.create(
        model=AGENT_NAME, messages=MESSAGES, max_tokens=2, reasoning_effort="minimal")
    assert out.headers[HEADER] == "minimal; enable_thinking=false"


def test_models_endpoint_publishes_the_mapping(agent_http, http):
    agent = agent_http.get("/v1/models").json()["data"][0]["capabilities"]
    effort = agent["reasoning_effort"]
    assert effort["supported"] and effort["template_variables"] == ["enable_thinking"]
    assert effort["mapping"] == {lvl: {"enable_thinking": lvl not in OFF} for lvl in EFFORT_LEVELS}
    assert agent["tools"] is True
    assert agent["input"]["image"] is False and "application/pdf" in agent["input"]["file"][
        "mime_types"]
    plain = http.get("/v1/models").json()["data"][0]["capabilities"]["reasoning_effort"]
    assert not plain["supported"] and plain["when_unsupported"] == "ignore"
    assert plain["mapping"] == dict.fromkeys(EFFORT_LEVELS)  # tiny-chat's template: no switch
