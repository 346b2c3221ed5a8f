"""Chat templates render (and tokenize) exactly as transformers' apply_chat_template does."""

from __future__ import annotations

import datetime
import json
import os
import shutil

import pytest
from text_fixtures import TEMPLATES_DIR, TINY_CHAT_DIR, deepseek_dir, load_hf, load_ours, qwen_dir

from dgjax.text.chat_template import ChatTemplateError, compile_chat_template
from dgjax.text.tokenizer import Tokenizer

WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city; answers in °C.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "e.g. Zürich or 東京"}},
                "required": ["city"],
            },
        },
    },
    {"type": "function", "function": {"name": "now", "description": "The time.", "parameters": {"type": "object", "properties": {}}}},
]

CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hi there!"}],
    "system_and_turns": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say 你好 🙂"},
        {"role": "assistant", "content": "你好 🙂"},
        {"role": "user", "content": "Again, with <|im_end|> inside."},
    ],
    "tool_round_trip": [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Zürich and Tokyo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'}},
                {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "東京"}}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "21 °C"},
        {"role": "tool", "tool_call_id": "c2", "content": "18 °C"},
        {"role": "assistant", "content": "Zürich 21 °C, Tokyo 18 °C."},
        {"role": "user", "content": "Thanks"},
    ],
    "content_and_tool_call": [
        {"role": "user", "content": "Time?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "now", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
    ],
}


def assert_same_as_transformers(ours: Tokenizer, hf, messages, tools=None, **kwargs):
    for add_generation_prompt in (True, False):
        text = ours.apply_chat_template(messages, add_generation_prompt, tools, **kwargs)
        assert text == hf.apply_chat_template(
            messages, tools=tools, add_generation_prompt=add_generation_prompt, tokenize=False, **kwargs
        )
        ids = ours.encode_chat(messages, add_generation_prompt, tools, **kwargs)
        assert ids == hf.apply_chat_template(
            messages, tools=tools, add_generation_prompt=add_generation_prompt, tokenize=True, return_dict=False, **kwargs
        )


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
@pytest.mark.parametrize("with_tools", [False, True])
def test_tiny_chat_template_matches_transformers(name, with_tools):
    tools = WEATHER_TOOLS if with_tools else None
    assert_same_as_transformers(load_ours(TINY_CHAT_DIR), load_hf(TINY_CHAT_DIR), CONVERSATIONS[name], tools)


def test_tiny_chat_template_renders_chatml_with_tools_in_the_system_turn():
    text = load_ours(TINY_CHAT_DIR).apply_chat_template(CONVERSATIONS["tool_round_trip"], tools=WEATHER_TOOLS)
    assert text.startswith("<|im_start|>system\nUse tools when useful.\n\n# Tools\n")
    assert json.dumps(WEATHER_TOOLS[0], ensure_ascii=False) in text
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京"}}\n</tool_call>' in text
    assert "<|im_start|>user\n<tool_response>\n21 °C\n</tool_response>\n<tool_response>\n18 °C\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n")


def test_tiny_chat_template_accepts_openai_content_parts():
    ours, hf = load_ours(TINY_CHAT_DIR), load_hf(TINY_CHAT_DIR)
    messages = [{"role": "user", "content": [{"type": "text", "text": "part one, "}, {"type": "text", "text": "part two"}]}]
    assert_same_as_transformers(ours, hf, messages)
    assert "<|im_start|>user\npart one, part two<|im_end|>" in ours.apply_chat_template(messages)


@pytest.mark.parametrize("enable_thinking", [None, True, False])
def test_second_template_with_tools_system_prompt_and_reasoning(tiny_chat_copy, enable_thinking):
    shutil.copy(os.path.join(TEMPLATES_DIR, "qwen3_style.jinja"), os.path.join(tiny_chat_copy, "chat_template.jinja"))
    ours, hf = Tokenizer.from_dir(tiny_chat_copy), load_hf(tiny_chat_copy)
    kwargs = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    messages = CONVERSATIONS["tool_round_trip"][:-1] + [
        {"role": "assistant", "content": "Done.", "reasoning_content": "Both cities answered."},
        {"role": "user", "content": "And now?"},
        {"role": "assistant", "content": "<think>\nlook again\n</think>\n\nSame."},
    ]
    for tools in (None, WEATHER_TOOLS):
        assert_same_as_transformers(ours, hf, messages, tools, **kwargs)
    if enable_thinking is False:
        assert ours.apply_chat_template(messages, **kwargs).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_real_qwen_template_matches_transformers():
    ours, hf = load_ours(qwen_dir()), load_hf(qwen_dir())
    for name in ("single_user", "system_and_turns"):
        assert_same_as_transformers(ours, hf, CONVERSATIONS[name])


def test_real_deepseek_template_with_tool_calls_matches_transformers():
    ours, hf = load_ours(deepseek_dir()), load_hf(deepseek_dir())
    messages = [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "Weather in Zürich?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'}}],
        },
        {"role": "tool", "content": "21 °C"},
        {"role": "assistant", "content": "<think>easy</think>It is 21 °C."},
        {"role": "user", "content": "Thanks"},
    ]
    assert_same_as_transformers(ours, hf, messages)
    assert_same_as_transformers(ours, hf, CONVERSATIONS["system_and_turns"])


def test_named_templates_pick_tool_use_when_tools_are_given(tiny_chat_copy):
    config_path = os.path.join(tiny_chat_copy, "tokenizer_config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    config["chat_template"] = [
        {"name": "default", "template": "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"},
        {"name": "tool_use", "template": "{{ tools | length }} tools; {{ messages[-1].content }}"},
    ]
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    ours, hf = Tokenizer.from_dir(tiny_chat_copy), load_hf(tiny_chat_copy)
    messages = CONVERSATIONS["system_and_turns"]
    assert_same_as_transformers(ours, hf, messages)
    assert_same_as_transformers(ours, hf, messages, WEATHER_TOOLS)
    assert ours.apply_chat_template(messages, tools=WEATHER_TOOLS).startswith("2 tools; ")
    assert ours.apply_chat_template(messages, chat_template="tool_use", tools=[]) == "0 tools; " + messages[-1]["content"]


def test_continue_final_message_leaves_the_last_turn_open():
    ours, hf = load_ours(TINY_CHAT_DIR), load_hf(TINY_CHAT_DIR)
    messages = [{"role": "user", "content": "Count"}, {"role": "assistant", "content": "1, 2, "}]
    text = ours.apply_chat_template(messages, add_generation_prompt=False, continue_final_message=True)
    assert text == hf.apply_chat_template(messages, tokenize=False, continue_final_message=True)
    assert text.endswith("<|im_start|>assistant\n1, 2, ")


def test_tojson_filter_takes_transformers_arguments():
    ours, hf = load_ours(TINY_CHAT_DIR), load_hf(TINY_CHAT_DIR)
    template = (
        "{{ tools | tojson }}|{{ tools | tojson(indent=2) }}|{{ tools | tojson(sort_keys=true) }}|"
        "{{ tools | tojson(separators=(',', ':')) }}|{{ tools | tojson(ensure_ascii=true) }}|{{ '<&>' | tojson }}"
    )
    messages = CONVERSATIONS["single_user"]
    ours_text = ours.apply_chat_template(messages, tools=WEATHER_TOOLS, chat_template=template)
    assert ours_text == hf.apply_chat_template(messages, tools=WEATHER_TOOLS, chat_template=template, tokenize=False)
    assert '"<&>"' in ours_text and "Zürich" in ours_text and "Z\\u00fcrich" in ours_text


def test_templates_see_special_tokens_and_extra_variables():
    ours = load_ours(TINY_CHAT_DIR)
    template = "{{ eos_token }}|{{ pad_token }}|{{ bos_token is defined }}|{{ custom }}|{{ eos_token }}"
    out = ours.apply_chat_template(CONVERSATIONS["single_user"], chat_template=template, custom=[1, "x"])
    assert out == "<|im_end|>|<|endoftext|>|False|[1, 'x']|<|im_end|>"
    overridden = ours.apply_chat_template(CONVERSATIONS["single_user"], chat_template=template, custom=0, eos_token="E")
    assert overridden.startswith("E|") and overridden.endswith("|E")


def test_strftime_now_formats_the_current_time():
    ours = load_ours(TINY_CHAT_DIR)
    before = datetime.datetime.now().strftime("%Y-%m-%d")
    out = ours.apply_chat_template(CONVERSATIONS["single_user"], chat_template="{{ strftime_now('%Y-%m-%d') }}")
    after = datetime.datetime.now().strftime("%Y-%m-%d")
    assert out in {before, after}


@pytest.mark.parametrize(
    "template, fragment",
    [
        ("{{ raise_exception('roles must alternate') }}", "roles must alternate"),
        ("{% for m in messages %}{{ m.content ", "syntax error"),
        ("{{ messages.append(1) }}", "chat template error"),
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "chat template error"),
        ("{% set ns = namespace(_x=1) %}", "underscore"),
        ("{{ messages[0].content + 1 }}", "chat template"),
    ],
)
def test_template_failures_are_value_errors_with_a_message(template, fragment):
    with pytest.raises(ChatTemplateError, match=fragment) as info:
        load_ours(TINY_CHAT_DIR).apply_chat_template(CONVERSATIONS["single_user"], chat_template=template)
    assert isinstance(info.value, ValueError)


def test_tiny_chat_template_rejects_unknown_roles_and_late_system_messages():
    ours = load_ours(TINY_CHAT_DIR)
    with pytest.raises(ChatTemplateError, match="Unknown message role: narrator"):
        ours.apply_chat_template([{"role": "narrator", "content": "x"}])
    with pytest.raises(ChatTemplateError, match="System messages"):
        ours.apply_chat_template([{"role": "user", "content": "x"}, {"role": "system", "content": "y"}])
    with pytest.raises(ChatTemplateError, match="empty"):
        ours.apply_chat_template([])


def test_templates_are_compiled_once():
    template = "{{ messages | length }}"
    assert compile_chat_template(template) is compile_chat_template(template)


def test_generation_blocks_and_loop_controls_render_like_transformers():
    ours, hf = load_ours(TINY_CHAT_DIR), load_hf(TINY_CHAT_DIR)
    template = (
        "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
        "{% if m.role == 'assistant' %}{% generation %}<{{ m.content }}>{% endgeneration %}{% break %}{% endif %}"
        "[{{ m.content }}]\n{% endfor %}"
    )
    messages = CONVERSATIONS["system_and_turns"]
    text = ours.apply_chat_template(messages, chat_template=template)
    assert text == hf.apply_chat_template(messages, chat_template=template, tokenize=False, add_generation_prompt=True)
    assert text == "[Say 你好 🙂]\n<你好 🙂>"
