"""What every tool-call format shares: the call record, and one streaming scanner for all formats.

A format only says where a call block starts and ends and how to read one block's body; the
scanner does the rest, identically for a finished output (`parse`) and for text arriving in deltas
(`stream`), so the two cannot disagree. Its rules:
- A call is released only once its whole block has arrived and parsed: a block that turns out
  malformed (bad JSON, unknown markup) or is still open when the output ends is returned as plain
  content, so a client never receives a call it would have to take back.
- Text that may be the start of a marker (a trailing `<tool_ca`) is held back until decidable.
- Whitespace that only separates calls from each other or from the content (the newlines chat
  templates put around calls) is not content.
- A call of an OpenAI custom tool the request declared keeps its raw input (`CustomToolInput`).
- Arguments are always one JSON object serialized with `json.dumps(..., ensure_ascii=False)`;
  duplicate keys keep the last value (what `json.loads` and vLLM's XML parsers do).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

Tools = Sequence[Mapping[str, Any]] | None


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def custom_tool_names(tools: Tools) -> set[str]:
    """Names of the OpenAI custom (free-form input) tools a request declared."""
    names = set()
    for tool in tools or ():
        custom = tool.get("custom") if isinstance(tool, Mapping) and \
            tool.get("type") == "custom" else None
        if isinstance(custom, Mapping) and isinstance(custom.get("name"), str):
            names.add(custom["name"])
    return names


@dataclasses.dataclass(frozen=True)
class CustomToolInput:
    """What `parse_block` returns for a call of a declared custom tool: its raw input text."""

    name: str
    input: str


@dataclasses.dataclass
class ToolCall:
    name: str
    arguments: str  # a JSON object ("" for a custom tool)
    id: str = dataclasses.field(default_factory=new_call_id)
    custom_input: str | None = None  # set for an OpenAI custom tool's call

    def to_openai(self) -> dict[str, Any]:
        if self.custom_input is not None:
            return {"id": self.id, "type": "custom",
                    "custom": {"name": self.name, "input": self.custom_input}}
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}

    def stream_deltas(self, index: int) -> list[dict[str, Any]]:
        """OpenAI `delta.tool_calls` entries: the header with the name, then the payload."""
        if self.custom_input is not None:
            return [{"index": index, "id": self.id, "type": "custom",
                     "custom": {"name": self.name, "input": ""}},
                    {"index": index, "custom": {"input": self.custom_input}}]
        return [{"index": index, "id": self.id, "type": "function",
                 "function": {"name": self.name, "arguments": ""}},
                {"index": index, "function": {"arguments": self.arguments}}]


@dataclasses.dataclass
class ToolStreamDelta:
    """What one `feed` released: content text and OpenAI `delta.tool_calls` entries."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.content or self.tool_calls)


class ToolCallFormat:
    """One model family's tool-call markup. Subclasses set the markers and `parse_block`."""

    name: ClassVar[str]
    call_start: ClassVar[str]
    call_end: ClassVar[str]
    # Markers wrapping a run of calls (DeepSeek's `tool▁calls▁begin/end`): dropped from content.
    ignored_markers: ClassVar[tuple[str, ...]] = ()

    def parse_block(self, body: str,
                    tools: Tools) -> tuple[str, dict[str, Any]] | CustomToolInput | None:
        """(name, arguments) of the call whose body lies between the start and end markers, or
        a CustomToolInput for a custom tool `tools` declares; None when the body is not a
        well-formed call."""
        raise NotImplementedError

    @property
    def markers(self) -> tuple[str, ...]:
        return (self.call_start, self.call_end, *self.ignored_markers)

    def stream(self, tools: Tools = None, *, parallel_tool_calls: bool = True) -> ToolCallStream:
        return ToolCallStream(self, tools, max_calls=None if parallel_tool_calls else 1)

    def parse(self, text: str, tools: Tools = None, *,
              parallel_tool_calls: bool = True) -> tuple[str, list[ToolCall]]:
        """(content, calls) of a finished output."""
        s = self.stream(tools, parallel_tool_calls=parallel_tool_calls)
        s.feed(text)
        s.finish()
        return s.content, s.tool_calls


def _held_prefix_len(text: str, markers: Sequence[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of a marker."""
    longest = max(len(m) for m in markers) - 1
    for k in range(min(len(text), longest), 0, -1):
        tail = text[-k:]
        if any(m.startswith(tail) for m in markers):
            return k
    return 0


class ToolCallStream:
    """Incremental scanner: `feed` text deltas, then `finish`; each returns what became certain."""

    def __init__(self, fmt: ToolCallFormat, tools: Tools, max_calls: int | None = None) -> None:
        self.fmt = fmt
        self.tools = tools
        self.max_calls = max_calls
        self._openers = (fmt.call_start, *fmt.ignored_markers)
        self._buf = ""  # undecided text, or the open call's body so far
        self._in_call = False
        self._scanned = 0  # how far the open call's body has been searched for the end marker
        self._ws = ""  # whitespace held back: dropped if a call follows
        self._ws_before_call = ""  # the held whitespace when the open call began
        self._ws_follows_call = False
        self._emitted = False
        self._calls_seen = 0
        self._content: list[str] = []
        self.tool_calls: list[ToolCall] = []

    @property
    def content(self) -> str:
        return "".join(self._content)

    def feed(self, text: str) -> ToolStreamDelta:
        out = ToolStreamDelta()
        self._buf += text
        while True:
            if self._in_call:
                end = self._buf.find(self.fmt.call_end, self._scanned)
                if end < 0:
                    self._scanned = max(0, len(self._buf) - len(self.fmt.call_end) + 1)
                    break
                body, self._buf = self._buf[:end], self._buf[end + len(self.fmt.call_end):]
                self._in_call = False
                self._close_call(body, out)
                continue
            pos, marker = self._next_opener()
            if pos < 0:
                keep = _held_prefix_len(self._buf, self._openers)
                self._text(self._buf[:len(self._buf) - keep], out)
                self._buf = self._buf[len(self._buf) - keep:]
                break
            self._text(self._buf[:pos], out)
            self._buf = self._buf[pos + len(marker):]
            if marker == self.fmt.call_start:
                self._in_call, self._scanned = True, 0
                self._ws_before_call, self._ws = self._ws, ""
        return out

    def finish(self) -> ToolStreamDelta:
        """End of output: an open call and any held text become content."""
        out = ToolStreamDelta()
        if self._in_call:
            self._in_call = False
            self._ws = self._ws_before_call
            self._text(self.fmt.call_start + self._buf, out)
        else:
            self._text(self._buf, out)
        self._buf = ""
        if self._ws and not self._ws_follows_call:
            self._emit(self._ws, out)
        self._ws = ""
        return out

    def _next_opener(self) -> tuple[int, str]:
        best, found = -1, ""
        for m in self._openers:
            i = self._buf.find(m)
            if i >= 0 and (best < 0 or i < best or (i == best and len(m) > len(found))):
                best, found = i, m
        return best, found

    def _emit(self, text: str, out: ToolStreamDelta) -> None:
        self._content.append(text)
        out.content += text
        self._emitted = True

    def _text(self, text: str, out: ToolStreamDelta) -> None:
        """Plain text: emit it, holding trailing whitespace (a call may follow)."""
        if not text:
            return
        if self._ws_follows_call and not self._emitted:
            text = text.lstrip()  # the output began with calls: no leading whitespace after them
            if not text:
                return
        head = text.rstrip()
        if not head:
            self._ws += text
            return
        self._emit(self._ws + head, out)
        self._ws, self._ws_follows_call = text[len(head):], False

    def _close_call(self, body: str, out: ToolStreamDelta) -> None:
        call = self._read_call(body)
        if call is None:  # malformed: the block was text after all
            self._ws = self._ws_before_call
            self._text(self.fmt.call_start + body + self.fmt.call_end, out)
            return
        self._ws, self._ws_follows_call = "", True
        self._calls_seen += 1
        if self.max_calls is not None and self._calls_seen > self.max_calls:
            return  # parallel_tool_calls=false: later calls are dropped
        index = len(self.tool_calls)
        self.tool_calls.append(call)
        out.tool_calls += call.stream_deltas(index)

    def _read_call(self, body: str) -> ToolCall | None:
        try:
            parsed = self.fmt.parse_block(body, self.tools)
            if parsed is None:
                return None
            if isinstance(parsed, CustomToolInput):
                if parsed.name not in custom_tool_names(self.tools):
                    return None
                return ToolCall(name=parsed.name, arguments="", custom_input=parsed.input)
            name, args = parsed
            if not name or not isinstance(args, dict):
                return None
            return ToolCall(name=name, arguments=json.dumps(args, ensure_ascii=False,
                                                            allow_nan=False))
        except (ValueError, TypeError, RecursionError):
            return None
