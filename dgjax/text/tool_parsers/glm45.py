"""GLM-4.5 / 4.6 / 4.7: `<tool_call>NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>...
</tool_call>` (4.7 drops the newlines); values are typed by the request's tool schema. A declared
OpenAI custom tool's raw input follows its name line: `<tool_call>NAME\\n<input></tool_call>`."""

from __future__ import annotations

import re
from typing import Any

from dgjax.text.tool_parsers.arguments import convert_parameter, parameter_schema
from dgjax.text.tool_parsers.base import CustomToolInput, ToolCallFormat, Tools, custom_tool_names

_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)


class Glm45ToolCallFormat(ToolCallFormat):
    name = "glm45"
    call_start = "<tool_call>"
    call_end = "</tool_call>"

    def parse_block(self, body: str,
                    tools: Tools) -> tuple[str, dict[str, Any]] | CustomToolInput | None:
        head, _, raw = body.partition("\n")
        if head.strip() in custom_tool_names(tools):
            return CustomToolInput(head.strip(), raw)
        first = body.find("<arg_key>")
        name = (body if first < 0 else body[:first]).strip()
        if not name or "<" in name or "\n" in name or "{" in name:
            return None  # e.g. a Hermes JSON call: not this format
        args: dict[str, Any] = {}
        pos = max(first, 0) if first >= 0 else len(body)
        for p in _PAIR.finditer(body, pos):
            if body[pos:p.start()].strip():
                return None
            pos = p.end()
            key = p.group(1).strip()
            # string values are written verbatim (kept exactly); typed ones may be padded
            args[key] = convert_parameter(p.group(2), parameter_schema(tools, name, key))
        if body[pos:].strip():
            return None
        return name, args
