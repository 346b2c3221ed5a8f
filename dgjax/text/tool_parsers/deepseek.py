"""DeepSeek tool calls, between `<｜tool▁calls▁begin｜>` and `<｜tool▁calls▁end｜>`:
V3.1: `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜>`;
V3 / R1: `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{json}\\n```<｜tool▁call▁end｜>`.
One format reads both: the V3 body is recognised by its fenced JSON block. A declared OpenAI custom
tool's raw input: V3 `custom<｜tool▁sep｜>NAME\\n```\\n<input>\\n````,
V3.1 `NAME<｜tool▁sep｜><input>`."""

from __future__ import annotations

import json
import re
from typing import Any

from dgjax.text.tool_parsers.base import CustomToolInput, ToolCallFormat, Tools, custom_tool_names

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"

_V3_CUSTOM = re.compile(r"([^\n`]+)\n```\n(.*)\n```", re.DOTALL)
_V3_BODY = re.compile(r"\s*([^\s`{][^\n`]*?)\s*\n\s*```(?:json)?\s*\n?(.*?)\s*```\s*", re.DOTALL)


class DeepSeekToolCallFormat(ToolCallFormat):
    name = "deepseek_v31"
    call_start = CALL_BEGIN
    call_end = CALL_END
    ignored_markers = (CALLS_BEGIN, CALLS_END)

    def parse_block(self, body: str,
                    tools: Tools) -> tuple[str, dict[str, Any]] | CustomToolInput | None:
        names = custom_tool_names(tools)
        head, _, tail = body.partition(SEP)
        if names and head.strip() == "custom":
            m = _V3_CUSTOM.fullmatch(tail)
            if m is not None and m.group(1).strip() in names:
                return CustomToolInput(m.group(1).strip(), m.group(2))
        elif names and head.strip() in names:
            return CustomToolInput(head.strip(), tail)
        if body.count(SEP) != 1:
            return None
        head, tail = body.split(SEP)
        v3 = _V3_BODY.fullmatch(tail)
        if v3 is not None:  # head is the call type ("function")
            name, raw_args = v3.group(1), v3.group(2)
        else:
            name, raw_args = head, tail
        name = name.strip()
        if not name or "\n" in name:
            return None
        args = json.loads(raw_args) if raw_args.strip() else {}
        return name, args
