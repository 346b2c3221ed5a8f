"""Shared by the tool-parser tests: run a format streamed (split at every boundary, and character by
character) and whole, check the two agree and the stream obeys the OpenAI delta rules."""

from __future__ import annotations

import json
from typing import Any

from dgjax.text.tool_parsers import ToolCallFormat


def calls_of(tool_calls) -> list[tuple[str, Any]]:
    """(name, decoded arguments) of ToolCall records; the arguments must be a JSON object."""
    out = []
    for c in tool_calls:
        args = json.loads(c.arguments)
        assert isinstance(args, dict)
        assert c.id.startswith("call_")
        out.append((c.name, args))
    return out


def stream(fmt: ToolCallFormat, pieces: list[str], tools=None,
           parallel: bool = True) -> tuple[str, list[tuple[str, str, str]]]:
    """Feed `pieces`; returns (content, [(id, name, arguments)]) rebuilt from the deltas, checking
    each call's first delta carries index, id, type and name and later ones only arguments."""
    s = fmt.stream(tools, parallel_tool_calls=parallel)
    content, calls = "", []
    for d in [s.feed(p) for p in pieces] + [s.finish()]:
        content += d.content
        for tc in d.tool_calls:
            if tc["index"] == len(calls):
                assert tc["type"] == "function" and tc["id"].startswith("call_")
                assert tc["function"]["name"]
                calls.append([tc["id"], tc["function"]["name"], tc["function"]["arguments"]])
            else:
                assert tc["index"] == len(calls) - 1 and set(tc) == {"index", "function"}
                assert set(tc["function"]) == {"arguments"}
                calls[-1][2] += tc["function"]["arguments"]
    return content, [tuple(c) for c in calls]


def check_parse(fmt: ToolCallFormat, text: str, tools=None,
                parallel: bool = True) -> tuple[str, list[tuple[str, Any]]]:
    """`fmt.parse(text)` as (content, [(name, args)]), after checking that streaming the text split
    at any one position, or one character at a time, gives the same content and calls."""
    content, calls = fmt.parse(text, tools, parallel_tool_calls=parallel)
    whole = (content, [(c.name, c.arguments) for c in calls])
    splits = [[text[:i], text[i:]] for i in range(len(text) + 1)] + [list(text)]
    for pieces in splits:
        streamed_content, streamed_calls = stream(fmt, pieces, tools, parallel)
        assert (streamed_content, [(n, a) for _, n, a in streamed_calls]) == whole, pieces
    return content, calls_of(calls)


# ---- reference renderings: a call written the way each family's chat template writes it ----

def template_value(value) -> str:
    """XML-style formats write strings verbatim and every other value as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render_hermes(name: str, args, key: str = "arguments") -> str:
    return "<tool_call>\n" + json.dumps({"name": name, key: args}, ensure_ascii=False) + \
        "\n</tool_call>"


def render_qwen3_coder(name: str, args: dict) -> str:
    body = "".join(f"<parameter={k}>\n{template_value(v)}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def render_glm(name: str, args: dict, compact: bool = False) -> str:
    """GLM-4.5 puts pairs on their own lines; GLM-4.7 drops the newlines."""
    nl = "" if compact else "\n"
    pairs = "".join(f"<arg_key>{k}</arg_key>{nl}<arg_value>{template_value(v)}</arg_value>{nl}"
                    for k, v in args.items())
    return f"<tool_call>{name}{nl}{pairs}</tool_call>"


def render_deepseek_v31(name: str, args: dict) -> str:
    return f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{json.dumps(args, ensure_ascii=False)}" \
           "<｜tool▁call▁end｜>"


def render_deepseek_v3(name: str, args: dict) -> str:
    return f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n" \
           f"{json.dumps(args, ensure_ascii=False)}\n```<｜tool▁call▁end｜>"
