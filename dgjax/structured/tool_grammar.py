"""Lark grammars that force (or, lazily, allow) tool calls in a model family's format.

- `required` (tool_choice "required" or a named tool): the output is one tool-call section and
  nothing else; with `parallel` it may hold several calls.
- `auto`: free text until the format's trigger, then one constrained tool-call section, then the
  end (a lazy lexeme: llguidance lets any text through until the trigger appears). With an
  `answer` (response_format next to tools) there is no free text: the output is either the
  tool-call section or the JSON answer.

A function's arguments are its JSON schema (strict: enforced exactly; otherwise leniently, see
`json_schema`), or for the XML-style formats one tagged block per parameter (`xml_arguments`);
a custom tool's input is its Lark grammar or regex, each compiled as its own llguidance subgrammar
so its lexemes cannot clash with ours, or any text when it has no grammar.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from llguidance import LLMatcher

from dgjax.structured.json_schema import lark_json
from dgjax.structured.tool_formats import ToolCallFormat
from dgjax.structured.xml_arguments import xml_arguments_rule

__all__ = ["FunctionTool", "CustomTool", "AnswerSpec", "ToolGrammarError", "tool_call_grammar",
           "check_custom_grammar"]


@dataclasses.dataclass(frozen=True)
class FunctionTool:
    name: str
    parameters: Any  # a JSON schema
    strict: bool = False


@dataclasses.dataclass(frozen=True)
class CustomTool:
    name: str
    syntax: str | None = None  # "lark" | "regex" | None (free text)
    definition: str | None = None


@dataclasses.dataclass(frozen=True)
class AnswerSpec:
    """The JSON a plain answer must be (response_format next to tools)."""

    schema: Any
    strict: bool


class ToolGrammarError(ValueError):
    """A custom tool's grammar does not compile; `tool` is its index in the tool list."""

    def __init__(self, tool: int, message: str) -> None:
        self.tool = tool
        super().__init__(message)


_TEXT = r"/(.|\n)*/"


def _custom_lark(tool: CustomTool) -> str:
    if tool.syntax == "lark":
        return tool.definition or ""
    return "start: /" + _regex_body(tool.definition or "") + "/"


def _regex_body(regex: str) -> str:
    from llguidance import regex_to_lark

    return regex_to_lark(regex, "")  # OpenAI's regex tools use Rust regex syntax


def check_custom_grammar(tool: CustomTool) -> None:
    """Compile a custom tool's grammar alone, so its errors point at that tool."""
    if tool.syntax is None:
        return
    error = LLMatcher.validate_grammar(LLMatcher.grammar_from_lark(_custom_lark(tool)))
    if error:
        raise ToolGrammarError(-1, error)


class _Builder:
    def __init__(self, fmt: ToolCallFormat, special_ids: dict[str, int]) -> None:
        self.fmt = fmt
        self.special = {m: special_ids[m] for m in fmt.markers if m in special_ids}
        self.rules: list[str] = []
        self.subgrammars: list[dict[str, str]] = []

    def text(self, s: str) -> str:
        """Lark items for literal text; special-token markers become token references."""
        if not s:
            return ""
        if not self.special:
            return json.dumps(s, ensure_ascii=False)
        parts = re.split("(" + "|".join(map(re.escape, self.special)) + ")", s)
        items = [f"<[{self.special[p]}]>" if p in self.special else json.dumps(p, ensure_ascii=False)
                 for p in parts if p]
        return " ".join(items)

    def _split_at_special(self, s: str) -> tuple[str, str]:
        """(text before the first special marker, the rest)."""
        cut = min((s.find(m) for m in self.special if m in s), default=len(s))
        return s[:cut], s[cut:]

    def forbidden(self) -> list[str]:
        """Texts a raw XML argument value may not contain: where the parser would cut it."""
        ends = (self.fmt.xml_arguments.closing, self.fmt.call_end.strip())
        return [e for e in dict.fromkeys(ends) if e and e not in self.special]

    def call_rule(self, tools: list[FunctionTool | CustomTool]) -> str:
        fmt = self.fmt
        names = []
        for i, tool in enumerate(tools):
            rule = f"tool_{i}"
            names.append(rule)
            if isinstance(tool, FunctionTool) and fmt.xml_arguments is not None:
                args, rules = xml_arguments_rule(rule, tool.parameters, tool.strict,
                                                 fmt.xml_arguments, self.text,
                                                 self._split_at_special, self.forbidden())
                self.rules += rules
                body = (f"{self.text(fmt.function_prefix(tool.name))} {args} "
                        f"{self.text(fmt.function_suffix)}")
                self.rules.append(f"{rule}: {body} {self.text(fmt.call_end)}")
            elif isinstance(tool, FunctionTool):
                args = lark_json(tool.parameters, tool.strict)
                body = f"{self.text(fmt.function_prefix(tool.name))} {args} {self.text(fmt.function_suffix)}"
                self.rules.append(f"{rule}: {body} {self.text(fmt.call_end)}")
            elif tool.syntax is None:
                # Free text up to the closing text (a lazy lexeme ends at its first occurrence);
                # a special token in the closing needs no laziness: text never contains one.
                closing, special_rest = self._split_at_special(fmt.custom_suffix + fmt.call_end)
                head = self.text(fmt.custom_prefix(tool.name))
                if closing:
                    self.rules.append(f"{rule}_input[lazy]: {_TEXT} {self.text(closing)}")
                    self.rules.append(f"{rule}: {head} {rule}_input {self.text(special_rest)}")
                else:
                    self.rules.append(f"{rule}: {head} {_TEXT} {self.text(special_rest)}")
            else:
                sub = f"custom_{i}"
                self.subgrammars.append({"name": sub, "lark_grammar": _custom_lark(tool)})
                self.rules.append(
                    f"{rule}: {self.text(fmt.custom_prefix(tool.name))} @{sub} "
                    f"{self.text(fmt.custom_suffix)} {self.text(fmt.call_end)}")
        self.rules.append("call: " + " | ".join(names))
        return "call"

    def section_after_trigger(self, call: str, parallel: bool) -> str:
        """The tool-call section minus its leading trigger text."""
        fmt = self.fmt
        opening = (fmt.section_begin + fmt.call_begin)[len(fmt.trigger):]
        more = f"({self.text(fmt.call_sep + fmt.call_begin)} {call})*" if parallel else ""
        return f"{self.text(opening)} {call} {more} {self.text(fmt.section_end)}"

    def trigger(self) -> str:
        return self.text(self.fmt.trigger)

    def grammar(self, start: str) -> str:
        lark = "\n".join(["%llguidance {}", f"start: {start}", *self.rules, f"TEXT: {_TEXT}"]) + "\n"
        if self.subgrammars:
            return json.dumps({"grammars": [{"lark_grammar": lark}, *self.subgrammars]},
                              ensure_ascii=False)
        return LLMatcher.grammar_from_lark(lark)


def tool_call_grammar(fmt: ToolCallFormat, tools: list[FunctionTool | CustomTool], *,
                      mode: str, parallel: bool = True, answer: AnswerSpec | None = None,
                      special_ids: dict[str, int] | None = None) -> str:
    """An llguidance grammar for `tools` in `fmt`. `mode` is "required" or "auto";
    `special_ids` maps marker strings that are special tokens to their ids.

    Raises SchemaError (a function's parameters; `path` inside them) or ToolGrammarError.
    """
    if not tools:
        raise ValueError("no tools to call")
    for i, tool in enumerate(tools):
        if isinstance(tool, CustomTool):
            try:
                check_custom_grammar(tool)
            except ToolGrammarError as e:
                raise ToolGrammarError(i, str(e)) from None
    b = _Builder(fmt, special_ids or {})
    call = b.call_rule(tools)
    after = b.section_after_trigger(call, parallel)
    b.rules.append(f"section: {b.trigger()} {after}")
    if mode == "required":
        start = "section"
    elif mode == "auto" and answer is not None:
        b.rules.append(f"answer: {lark_json(answer.schema, answer.strict)}")
        start = "section | answer"
    elif mode == "auto":
        if fmt.trigger in b.special:  # a special token never occurs inside TEXT
            b.rules.append(f"tool_calls: TEXT {b.trigger()} {after}")
        else:
            b.rules.append(f"tool_calls_head[lazy]: TEXT {b.trigger()}")
            b.rules.append(f"tool_calls: tool_calls_head {after}")
        start = "tool_calls | TEXT"
    else:
        raise ValueError(f"unknown tool grammar mode {mode!r}")
    grammar = b.grammar(start)
    error = LLMatcher.validate_grammar(grammar)
    if error:
        raise ValueError(f"internal tool-call grammar error: {error}")
    return grammar
