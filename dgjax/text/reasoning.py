"""Reasoning (`<think>...</think>`) separated from the answer, for whole outputs and for streams.

Where the reasoning starts depends on the chat template, not the model: Qwen3 thinking models and
DeepSeek-R1/V3.1 (thinking on) end the prompt with `<think>`, so their output holds only the closing
tag; Qwen3 hybrid models open the tag themselves; with thinking off the prompt ends in `</think>`
(or the template adds nothing) and the output has no tags. The caller passes `in_reasoning` from the
prompt's tail (`prompt_opens_reasoning`); an output that begins with `<think>` enters reasoning
either way. Reasoning lasts until `</think>` or the end of output (a truncated thought is still
thought, and a stream cannot take reasoning back once sent). A later `<think>` is answer text.
Whitespace around the tags is trimmed, as the templates do when they render reasoning back.
"""

from __future__ import annotations

import enum

THINK_START = "<think>"
THINK_END = "</think>"
AUTO, NONE = "auto", "none"
# vLLM's reasoning-parser names for the families that use <think> tags.
REASONING_PARSER_NAMES = ("think", "qwen3", "deepseek_r1", "deepseek_v3", "glm45")


class _State(enum.Enum):
    OPENING = "opening"  # before the first non-space text: is it <think>?
    REASONING = "reasoning"
    AFTER = "after"  # just past </think>: leading whitespace of the answer is dropped
    CONTENT = "content"


def prompt_opens_reasoning(prompt_tail: str, start: str = THINK_START) -> bool:
    """Whether the rendered prompt leaves the model inside an open reasoning block."""
    return prompt_tail.rstrip().endswith(start)


class ReasoningStream:
    """Feed text deltas, then `finish`; each returns the (reasoning, content) text now certain."""

    def __init__(self, in_reasoning: bool = False, start: str = THINK_START,
                 end: str = THINK_END) -> None:
        self.start, self.end = start, end
        self.in_reasoning = in_reasoning
        self._state = _State.OPENING
        self._buf = ""
        self._ws = ""  # reasoning's trailing whitespace, held: dropped before </think>
        self._reasoning: list[str] | None = None
        self._content: list[str] = []

    @property
    def reasoning(self) -> str | None:
        """The reasoning text; None when the output had no reasoning block."""
        return None if self._reasoning is None else "".join(self._reasoning)

    @property
    def content(self) -> str:
        return "".join(self._content)

    def feed(self, text: str) -> tuple[str, str]:
        self._buf += text
        return self._advance(final=False)

    def finish(self) -> tuple[str, str]:
        return self._advance(final=True)

    def _advance(self, final: bool) -> tuple[str, str]:
        reasoning, content = [], []
        if self._state is _State.OPENING:
            self._open(final)
        if self._state is _State.REASONING:
            cut = self._buf.find(self.end)
            if cut >= 0:
                reasoning.append(self._reason(self._buf[:cut]))
                self._ws, self._buf = "", self._buf[cut + len(self.end):]
                self._state = _State.AFTER
            else:
                keep = 0 if final else _held_prefix_len(self._buf, self.end)
                reasoning.append(self._reason(self._buf[:len(self._buf) - keep]))
                self._buf = self._buf[len(self._buf) - keep:]
        if self._state is _State.AFTER:
            self._buf = self._buf.lstrip()
            if self._buf:
                self._state = _State.CONTENT
        if self._state is _State.CONTENT and self._buf:
            content.append(self._buf)
            self._buf = ""
        r, c = "".join(reasoning), "".join(content)
        if r:
            self._reasoning.append(r)
        if c:
            self._content.append(c)
        return r, c

    def _open(self, final: bool) -> None:
        head = self._buf.lstrip()
        if head.startswith(self.start):
            self._buf = head[len(self.start):]
        elif self.start.startswith(head) and not final:
            return  # still undecided: empty, or a prefix of <think>
        elif not self.in_reasoning:
            self._state = _State.CONTENT
            return
        self._state = _State.REASONING
        self._reasoning = []

    def _reason(self, text: str) -> str:
        """Reasoning text to release: leading whitespace dropped, trailing whitespace held."""
        if not self._reasoning:  # nothing released yet
            text = text.lstrip()
        head = text.rstrip()
        if not head:
            self._ws += text
            return ""
        out = self._ws + text[:len(head)]
        self._ws = text[len(head):]
        return out


def _held_prefix_len(text: str, marker: str) -> int:
    for k in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-k:]):
            return k
    return 0


class ReasoningParser:
    """`<think>`-style reasoning; one instance serves every request."""

    def __init__(self, start: str = THINK_START, end: str = THINK_END) -> None:
        self.start, self.end = start, end

    def stream(self, in_reasoning: bool = False) -> ReasoningStream:
        return ReasoningStream(in_reasoning, self.start, self.end)

    def parse(self, text: str, in_reasoning: bool = False) -> tuple[str | None, str]:
        """(reasoning or None, content) of a finished output."""
        s = self.stream(in_reasoning)
        s.feed(text)
        s.finish()
        return s.reasoning, s.content

    def prompt_opens_reasoning(self, prompt_tail: str) -> bool:
        return prompt_opens_reasoning(prompt_tail, self.start)


def reasoning_parser_choices() -> list[str]:
    return [AUTO, NONE, *REASONING_PARSER_NAMES]


def resolve_reasoning_parser(choice: str, template: str | None) -> ReasoningParser | None:
    """The `--reasoning-parser` value: "auto" is on when the chat template mentions `<think>`."""
    if choice == NONE:
        return None
    if choice == AUTO:
        return ReasoningParser() if template and THINK_START in template else None
    if choice not in REASONING_PARSER_NAMES:
        raise ValueError(f"unknown reasoning parser {choice!r}; known: "
                         f"{', '.join(REASONING_PARSER_NAMES)}")
    return ReasoningParser()
