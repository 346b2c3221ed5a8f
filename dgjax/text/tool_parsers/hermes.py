"""Qwen3 / Qwen3-Next / Hermes: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`."""

from __future__ import annotations

import json
from typing import Any

from dgjax.text.tool_parsers.base import ToolCallFormat, Tools


class HermesToolCallFormat(ToolCallFormat):
    name = "hermes"
    call_start = "<tool_call>"
    call_end = "</tool_call>"

    def parse_block(self, body: str, tools: Tools) -> tuple[str, dict[str, Any]] | None:
        obj = json.loads(body)
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None
        # "parameters" is what Llama-style prompts ask for; no key: a call without arguments
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):  # some fine-tunes double-encode the arguments
            args = json.loads(args) if args.strip() else {}
        return obj["name"].strip(), args
