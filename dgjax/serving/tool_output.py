"""Chat output post-processing: reasoning, content and tool calls, for whole answers and streams.

The server picks a tool-call format and a reasoning parser once (from the chat template, or the
`--tool-call-parser` / `--reasoning-parser` flags); each choice of each request gets its own
incremental parsers, fed the engine's text deltas. Reasoning is split off first, so markup inside
the reasoning is never read as a tool call. Tool calls are parsed only when the request sends
`tools` and `tool_choice` is not "none".

A call of a declared OpenAI custom tool comes back as `{"type": "custom", "custom": {"name",
"input"}}`, streamed as a header delta (`custom.input` "") and then the whole input. The openai
SDK's plain `create(stream=True)` passes those deltas through (as extra fields: its delta type
only declares function calls); its accumulating `chat.completions.stream` helper (openai 3.57)
handles only function calls and fails on a custom one.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from dgjax.text.chat_template import ChatTemplateError
from dgjax.text.reasoning import ReasoningParser, ReasoningStream, resolve_reasoning_parser
from dgjax.text.tool_parsers import ToolCallFormat, ToolCallStream, resolve_tool_call_format

# Enough prompt tokens to see whether the generation prompt ends inside an open <think>.
_PROMPT_TAIL_TOKENS = 16


def chat_template_text(tokenizer) -> str:
    """All of a tokenizer's chat templates as one text, for detecting the model's markup."""
    templates = getattr(tokenizer, "chat_template", None)
    if isinstance(templates, Mapping):
        return "\n".join(str(t) for t in templates.values())
    return templates or ""


def _special_token_texts(tokenizer) -> set[str]:
    backend = getattr(tokenizer, "backend", None)
    if backend is None:
        return set()
    return {t.content for t in backend.get_added_tokens_decoder().values() if t.special}


def _with_string_arguments(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """The messages with tool-call arguments as JSON text, or None when none was an object."""
    changed = False
    out = []
    for m in messages:
        calls = m.get("tool_calls")
        if isinstance(calls, list):
            new_calls = []
            for call in calls:
                fn = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(fn, Mapping) and not isinstance(fn.get("arguments"), str) \
                        and fn.get("arguments") is not None:
                    fn = {**fn, "arguments": json.dumps(fn["arguments"], ensure_ascii=False)}
                    call, changed = {**call, "function": fn}, True
                new_calls.append(call)
            m = {**m, "tool_calls": new_calls}
        out.append(m)
    return out if changed else None


def encode_chat_prompt(tokenizer, messages: list[dict[str, Any]], add_generation_prompt: bool,
                       tools: list[dict[str, Any]] | None, **kwargs: Any) -> list[int]:
    """Prompt ids, with past tool-call arguments as objects (transformers' convention, which the
    Qwen3-Coder and GLM templates iterate) or, when the template fails on objects, as JSON text
    (DeepSeek V3/V3.1 templates concatenate them as strings)."""
    try:
        return tokenizer.encode_chat(messages, add_generation_prompt, tools, **kwargs)
    except ChatTemplateError as first_error:
        as_text = _with_string_arguments(messages)
        if as_text is None:
            raise
        try:
            return tokenizer.encode_chat(as_text, add_generation_prompt, tools, **kwargs)
        except ChatTemplateError:
            raise first_error from None


@dataclasses.dataclass(frozen=True)
class OutputParsing:
    """The server-wide parsers; `for_request` makes the per-request ones."""

    tool_format: ToolCallFormat | None = None
    reasoning: ReasoningParser | None = None
    special_markers: frozenset[str] = frozenset()  # markers the tokenizer would skip as special

    @classmethod
    def from_tokenizer(cls, tokenizer, tool_call_parser: str = "auto",
                       reasoning_parser: str = "auto") -> OutputParsing:
        template = chat_template_text(tokenizer)
        tool_format = resolve_tool_call_format(tool_call_parser, template)
        reasoning = resolve_reasoning_parser(reasoning_parser, template)
        markers = set(tool_format.markers if tool_format else ())
        if reasoning is not None:
            markers |= {reasoning.start, reasoning.end}
        return cls(tool_format, reasoning, frozenset(markers & _special_token_texts(tokenizer)))

    def for_request(self, req, prompt_ids: Sequence[int], tokenizer) -> RequestParsing:
        """Parsers for one chat request. Turns `skip_special_tokens` off when the model's markup
        is made of special tokens (GLM): the parser must see it (vLLM does the same)."""
        tool_format = self.tool_format if req.tools and req.tool_choice != "none" else None
        in_reasoning = False
        if self.reasoning is not None:
            tail = tokenizer.decode(list(prompt_ids[-_PROMPT_TAIL_TOKENS:]),
                                    skip_special_tokens=False)
            in_reasoning = self.reasoning.prompt_opens_reasoning(tail)
        used = set(tool_format.markers if tool_format else ())
        if self.reasoning is not None:
            used |= {self.reasoning.start, self.reasoning.end}
        if used & self.special_markers:
            req.common.params.skip_special_tokens = False
        return RequestParsing(tool_format, self.reasoning, in_reasoning, req.tools,
                              req.parallel_tool_calls)


@dataclasses.dataclass(frozen=True)
class RequestParsing:
    tool_format: ToolCallFormat | None
    reasoning: ReasoningParser | None
    in_reasoning: bool
    tools: list[dict[str, Any]] | None
    parallel_tool_calls: bool

    def choice(self) -> ChoiceParser:
        return ChoiceParser(
            self.reasoning.stream(self.in_reasoning) if self.reasoning else None,
            self.tool_format.stream(self.tools, parallel_tool_calls=self.parallel_tool_calls)
            if self.tool_format else None)


class ChoiceParser:
    """One choice's output as OpenAI message fields (whole) or `delta` objects (streamed)."""

    def __init__(self, reasoning: ReasoningStream | None, tools: ToolCallStream | None) -> None:
        self._reasoning = reasoning
        self._tools = tools

    @property
    def has_tool_calls(self) -> bool:
        return bool(self._tools and self._tools.tool_calls)

    def _step(self, text: str, finished: bool) -> tuple[str, str, list[dict[str, Any]]]:
        reasoning, content = "", text
        if self._reasoning is not None:
            reasoning, content = self._reasoning.feed(text)
            if finished:
                r, c = self._reasoning.finish()
                reasoning, content = reasoning + r, content + c
        calls: list[dict[str, Any]] = []
        if self._tools is not None:
            d = self._tools.feed(content)
            if finished:
                end = self._tools.finish()
                d.content += end.content
                d.tool_calls += end.tool_calls
            content, calls = d.content, d.tool_calls
        return reasoning, content, calls

    def deltas(self, text: str, finished: bool) -> list[dict[str, Any]]:
        """Stream `delta` objects for a text delta: reasoning and content together, then one per
        tool-call fragment (a call's header with its name, then its arguments)."""
        reasoning, content, calls = self._step(text, finished)
        out: list[dict[str, Any]] = []
        delta: dict[str, Any] = {}
        if reasoning:
            delta["reasoning_content"] = reasoning
        if content:
            delta["content"] = content
        if delta:
            out.append(delta)
        out += [{"tool_calls": [call]} for call in calls]
        return out

    def message(self, text: str) -> dict[str, Any]:
        """The assistant message for a whole output."""
        self._step(text, finished=True)
        content = self._tools.content if self._tools is not None else (
            self._reasoning.content if self._reasoning is not None else text)
        calls = [c.to_openai() for c in self._tools.tool_calls] if self._tools else []
        msg: dict[str, Any] = {"role": "assistant", "content": content if content or not calls
                               else None, "refusal": None, "tool_calls": calls}
        if self._reasoning is not None:
            msg["reasoning_content"] = self._reasoning.reasoning
        return msg

    def finish_reason(self, reason: str | None) -> str | None:
        """"tool_calls" once the choice returned calls (as vLLM: also when cut by length)."""
        if reason is not None and reason != "abort" and self.has_tool_calls:
            return "tool_calls"
        return reason
