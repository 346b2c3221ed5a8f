"""Qwen3-Coder XML: `<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n...
</function>\\n</tool_call>`; values are typed by the request's tool schema. A declared OpenAI custom
tool's raw input stands in place of the parameters: `<function=NAME>\\n<input>\\n</function>`."""

from __future__ import annotations

import re
from typing import Any

from dgjax.text.tool_parsers.arguments import convert_parameter, parameter_schema
from dgjax.text.tool_parsers.base import CustomToolInput, ToolCallFormat, Tools, custom_tool_names

_FUNCTION = re.compile(r"\s*<function=([^>\n]+)>(.*)</function>\s*", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.DOTALL)


class Qwen3CoderToolCallFormat(ToolCallFormat):
    name = "qwen3_coder"
    call_start = "<tool_call>"
    call_end = "</tool_call>"

    def parse_block(self, body: str,
                    tools: Tools) -> tuple[str, dict[str, Any]] | CustomToolInput | None:
        m = _FUNCTION.fullmatch(body)
        if m is None:
            return None
        name, inner = m.group(1).strip(), m.group(2)
        if name in custom_tool_names(tools):
            return CustomToolInput(name, inner.removeprefix("\n").removesuffix("\n"))
        args: dict[str, Any] = {}
        pos = 0
        for p in _PARAMETER.finditer(inner):
            if inner[pos:p.start()].strip():
                return None  # text outside the parameter tags: not this format
            pos = p.end()
            key = p.group(1).strip()
            # the template writes "\n" + value + "\n"; only those two newlines are markup
            value = p.group(2).removeprefix("\n").removesuffix("\n")
            args[key] = convert_parameter(value, parameter_schema(tools, name, key))
        if inner[pos:].strip():
            return None
        return name, args
