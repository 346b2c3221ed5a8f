"""Tool-call formats by name (vLLM's `--tool-call-parser` names) and detection from a chat template.

A template that renders past tool calls shows the model's own markup, so it names the format. The
checks run most specific first: GLM and Qwen3-Coder templates also contain `<tool_call>`.
"""

from __future__ import annotations

from dgjax.text.tool_parsers.base import ToolCallFormat
from dgjax.text.tool_parsers.deepseek import DeepSeekToolCallFormat
from dgjax.text.tool_parsers.glm45 import Glm45ToolCallFormat
from dgjax.text.tool_parsers.hermes import HermesToolCallFormat
from dgjax.text.tool_parsers.qwen3_coder import Qwen3CoderToolCallFormat

TOOL_CALL_FORMATS: dict[str, type[ToolCallFormat]] = {
    "hermes": HermesToolCallFormat,
    "qwen3": HermesToolCallFormat,
    "qwen3_next": HermesToolCallFormat,
    "qwen3_coder": Qwen3CoderToolCallFormat,
    "qwen3_xml": Qwen3CoderToolCallFormat,
    "glm45": Glm45ToolCallFormat,
    "glm47": Glm45ToolCallFormat,
    "glm4_moe": Glm45ToolCallFormat,
    "deepseek_v3": DeepSeekToolCallFormat,
    "deepseek_v31": DeepSeekToolCallFormat,
}
AUTO, NONE = "auto", "none"

_TEMPLATE_HINTS = (
    ("<arg_key>", "glm45"),
    ("<function=", "qwen3_coder"),
    ("tool▁calls▁begin", "deepseek_v31"),
    ("<tool_call>", "hermes"),
)


def tool_parser_choices() -> list[str]:
    """Values the `--tool-call-parser` flag accepts."""
    return [AUTO, NONE, *TOOL_CALL_FORMATS]


def get_tool_call_format(name: str) -> ToolCallFormat:
    try:
        return TOOL_CALL_FORMATS[name]()
    except KeyError:
        raise ValueError(f"unknown tool-call parser {name!r}; known: "
                         f"{', '.join(TOOL_CALL_FORMATS)}") from None


def detect_tool_call_format(template: str | None) -> str | None:
    """The format a chat template renders tool calls in, or None when it shows none we know."""
    for hint, name in _TEMPLATE_HINTS:
        if template and hint in template:
            if name == "deepseek_v31" and "```json" in template:
                return "deepseek_v3"  # the same parser; the name says which template it was
            return name
    return None


def resolve_tool_call_format(choice: str, template: str | None) -> ToolCallFormat | None:
    """The flag's value ("auto": detect from the template, "none": off, or a format's name)."""
    if choice == NONE:
        return None
    if choice == AUTO:
        name = detect_tool_call_format(template)
        return None if name is None else get_tool_call_format(name)
    return get_tool_call_format(choice)
