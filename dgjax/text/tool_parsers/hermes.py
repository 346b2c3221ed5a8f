"""Qwen3 / Qwen3-Next / Hermes: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`;
a declared OpenAI custom tool's call: `<tool_call>\\n{"name": ...}\\n<raw input>\\n</tool_call>`."""

from __future__ import annotations

import json
from typing import Any

from dgjax.text.tool_parsers.base import CustomToolInput, ToolCallFormat, Tools, custom_tool_names


class HermesToolCallFormat(ToolCallFormat):
    name = "hermes"
    call_start = "<tool_call>"
    call_end = "</tool_call>"

    def parse_block(self, body: str,
                    tools: Tools) -> tuple[str, dict[str, Any]] | CustomToolInput | None:
        custom = _custom_call(body, tools)
        if custom is not None:
            return custom
        obj = json.loads(body)
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None
        # "parameters" is what Llama-style prompts ask for; no key: a call without arguments
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):  # some fine-tunes double-encode the arguments
            args = json.loads(args) if args.strip() else {}
        return obj["name"].strip(), args


def _custom_call(body: str, tools: Tools) -> CustomToolInput | None:
    """A name-only JSON line naming a declared custom tool, then its raw input."""
    names = custom_tool_names(tools)
    if not names:
        return None
    head, _, rest = body.removeprefix("\n").removesuffix("\n").partition("\n")
    try:
        obj = json.loads(head)
    except ValueError:
        return None
    if isinstance(obj, dict) and set(obj) == {"name"} and obj["name"] in names:
        return CustomToolInput(obj["name"], rest)
    return None
