"""Past OpenAI custom tool calls in a conversation, rendered as the text the model wrote.

Chat templates only know function calls (`tool_call.function.arguments`), so an assistant
message's custom calls (`{"type": "custom", "custom": {"name", "input"}}`) are written into its
content in the model family's own markup, the same text the server reads them back from
(`structured.tool_formats`: `call_begin custom_prefix(name) <input> custom_suffix call_end`).
Custom calls come after the message's text and before its function calls, which the template
renders as usual.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dgjax.structured.tool_formats import ToolCallFormat

__all__ = ["has_custom_tool_calls", "custom_calls_text", "inline_custom_tool_calls"]


def _is_custom(call: Any) -> bool:
    return isinstance(call, Mapping) and call.get("type") == "custom"


def has_custom_tool_calls(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any(_is_custom(c) for m in messages for c in m.get("tool_calls") or ())


def custom_calls_text(fmt: ToolCallFormat, calls: Sequence[Mapping[str, Any]]) -> str:
    """One tool-call section holding the custom calls, as the model writes it."""
    blocks = [fmt.call_begin + fmt.custom_prefix(c["custom"]["name"]) +
              c["custom"].get("input", "") + fmt.custom_suffix + fmt.call_end for c in calls]
    return fmt.section_begin + fmt.call_sep.join(blocks) + fmt.section_end


def inline_custom_tool_calls(messages: Sequence[Mapping[str, Any]],
                             fmt: ToolCallFormat) -> list[dict[str, Any]]:
    """The messages with each assistant turn's custom calls moved into its content."""
    out = []
    for m in messages:
        calls = m.get("tool_calls") or []
        custom = [c for c in calls if _is_custom(c)]
        if not custom:
            out.append(dict(m))
            continue
        content = m.get("content") or ""
        text = custom_calls_text(fmt, custom)
        msg = {**m, "content": content + ("\n" if content else "") + text}
        rest = [c for c in calls if not _is_custom(c)]
        if rest:
            msg["tool_calls"] = rest
        else:
            msg.pop("tool_calls", None)
        out.append(msg)
    return out
