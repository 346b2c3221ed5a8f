"""Tool calls out of model text: one small format class per model family, one shared scanner."""

from dgjax.text.tool_parsers.base import (CustomToolInput, ToolCall, ToolCallFormat, ToolCallStream,
                                          ToolStreamDelta, custom_tool_names)
from dgjax.text.tool_parsers.deepseek import DeepSeekToolCallFormat
from dgjax.text.tool_parsers.glm45 import Glm45ToolCallFormat
from dgjax.text.tool_parsers.hermes import HermesToolCallFormat
from dgjax.text.tool_parsers.qwen3_coder import Qwen3CoderToolCallFormat
from dgjax.text.tool_parsers.registry import (TOOL_CALL_FORMATS, detect_tool_call_format,
                                              get_tool_call_format, resolve_tool_call_format,
                                              tool_parser_choices)

__all__ = [
    "TOOL_CALL_FORMATS",
    "CustomToolInput",
    "DeepSeekToolCallFormat",
    "Glm45ToolCallFormat",
    "HermesToolCallFormat",
    "Qwen3CoderToolCallFormat",
    "ToolCall",
    "ToolCallFormat",
    "ToolCallStream",
    "ToolStreamDelta",
    "custom_tool_names",
    "detect_tool_call_format",
    "get_tool_call_format",
    "resolve_tool_call_format",
    "tool_parser_choices",
]
