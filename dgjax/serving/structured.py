"""Structured output for the OpenAI endpoints: request fields -> one llguidance grammar.

Chat: `response_format` (`json_object`, `json_schema` strict or not), `tools` (function tools
with `strict`, OpenAI custom tools with a Lark or regex grammar), `tool_choice` and
`parallel_tool_calls`. Completions: `response_format`. Both: vLLM's `structured_outputs`
(`json`, `regex`, `choice`, `grammar`). Every problem is a 400 naming the field, and for a schema
the path inside it (llguidance does not say where an unsupported keyword sits; we do).

Grammars are built and compiled on a worker thread: a large schema can take a while, and the
compiled result is cached by the engine's GrammarBackend, so `Engine.submit` only copies it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from llguidance import LLMatcher

from dgjax.serving.errors import APIError, bad_request
from dgjax.serving.tool_output import chat_template_text
from dgjax.structured.backend import GrammarError
from dgjax.structured.json_schema import SchemaError, check_schema, dotted, schema_grammar
from dgjax.structured.reasoning import after_reasoning
from dgjax.structured.tool_formats import ToolCallFormat, detect_format
from dgjax.structured.tool_grammar import (AnswerSpec, CustomTool, FunctionTool, ToolGrammarError,
                                           check_custom_grammar, tool_call_grammar)

__all__ = ["chat_grammar", "completion_grammar"]

_ANY_OBJECT = {"type": "object"}


def _schema_error(e: SchemaError, param: str) -> APIError:
    where = param + dotted(e.path)
    return bad_request(f"Invalid schema at '{where}': {e.reason}: {e.detail}", where,
                       "invalid_json_schema")


def _require(value: Any, kind: type, param: str) -> Any:
    if not isinstance(value, kind):
        what = {str: "a string", dict: "an object", bool: "a boolean", list: "an array"}[kind]
        raise bad_request(f"'{param}' must be {what}.", param, "invalid_type")
    return value


def parse_response_format(raw: Any) -> AnswerSpec | None:
    """None for text; else the JSON the answer must be. Checks the schema (400 naming its path)."""
    if raw is None:
        return None
    fmt = _require(raw, dict, "response_format")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return AnswerSpec(_ANY_OBJECT, strict=False)
    if kind != "json_schema":
        raise bad_request("'response_format.type' must be 'text', 'json_object' or 'json_schema'.",
                          "response_format", "invalid_value")
    spec = _require(fmt.get("json_schema"), dict, "response_format.json_schema")
    if spec.get("name") is not None:
        _require(spec["name"], str, "response_format.json_schema.name")
    strict = spec.get("strict")
    strict = False if strict is None else _require(strict, bool, "response_format.json_schema.strict")
    schema = spec.get("schema", {})
    if not isinstance(schema, (dict, bool)):
        raise bad_request("'response_format.json_schema.schema' must be a JSON schema object.",
                          "response_format.json_schema.schema", "invalid_type")
    try:
        check_schema(schema, strict)
    except SchemaError as e:
        raise _schema_error(e, "response_format.json_schema.schema") from None
    return AnswerSpec(schema, strict)


def parse_tools(raw: list[Any] | None) -> list[FunctionTool | CustomTool]:
    """Function and custom tools, each checked (schema in its mode, custom grammar compiled)."""
    out: list[FunctionTool | CustomTool] = []
    for k, tool in enumerate(raw or []):
        p = f"tools[{k}]"
        _require(tool, dict, p)
        if tool.get("type", "function") == "custom":
            out.append(_parse_custom_tool(_require(tool.get("custom"), dict, p + ".custom"), p))
            continue
        fn = _require(tool.get("function"), dict, p + ".function")
        name = _require(fn.get("name"), str, p + ".function.name")
        strict = fn.get("strict")
        strict = False if strict is None else _require(strict, bool, p + ".function.strict")
        params = fn.get("parameters")
        params = {"type": "object", "properties": {}} if params is None else params
        if not isinstance(params, dict):
            raise bad_request(f"'{p}.function.parameters' must be a JSON schema object.",
                              p + ".function.parameters", "invalid_type")
        try:
            check_schema(params, strict)
        except SchemaError as e:
            raise _schema_error(e, p + ".function.parameters") from None
        out.append(FunctionTool(name, params, strict))
    return out


def _parse_custom_tool(custom: dict, p: str) -> CustomTool:
    name = _require(custom.get("name"), str, p + ".custom.name")
    fmt = custom.get("format")
    if fmt is None or (isinstance(fmt, dict) and fmt.get("type") == "text"):
        return CustomTool(name)
    _require(fmt, dict, p + ".custom.format")
    if fmt.get("type") != "grammar":
        raise bad_request(f"'{p}.custom.format.type' must be 'text' or 'grammar'.",
                          p + ".custom.format.type", "invalid_value")
    grammar = _require(fmt.get("grammar"), dict, p + ".custom.format.grammar")
    syntax = grammar.get("syntax")
    if syntax not in ("lark", "regex"):
        raise bad_request(f"'{p}.custom.format.grammar.syntax' must be 'lark' or 'regex'.",
                          p + ".custom.format.grammar.syntax", "invalid_value")
    definition = _require(grammar.get("definition"), str, p + ".custom.format.grammar.definition")
    tool = CustomTool(name, syntax, definition)
    try:
        check_custom_grammar(tool)
    except ToolGrammarError as e:
        param = p + ".custom.format.grammar.definition"
        raise bad_request(f"Invalid {syntax} grammar in '{param}': {e}", param,
                          "invalid_grammar") from None
    return tool


def parse_tool_choice(raw: Any, tools: list[FunctionTool | CustomTool]) -> tuple[str, str | None]:
    """("none" | "auto" | "required", forced tool name or None)."""
    if raw is None:
        return ("auto" if tools else "none"), None
    if raw in ("none", "auto", "required"):
        if raw == "required" and not tools:
            raise bad_request("tool_choice 'required' needs 'tools'.", "tool_choice", "invalid_value")
        return raw, None
    if isinstance(raw, dict) and raw.get("type") in ("function", "custom"):
        kind = raw["type"]
        inner = raw.get(kind)
        name = inner.get("name") if isinstance(inner, dict) else raw.get("name")
        _require(name, str, f"tool_choice.{kind}.name")
        want = FunctionTool if kind == "function" else CustomTool
        if not any(isinstance(t, want) and t.name == name for t in tools):
            raise bad_request(f"tool_choice names {kind} tool {name!r}, which is not in 'tools'.",
                              "tool_choice", "invalid_value")
        return "required", name
    raise bad_request("'tool_choice' must be 'none', 'auto', 'required' or "
                      "{'type': 'function', 'function': {'name': ...}}.", "tool_choice",
                      "invalid_value")


def _vllm_structured_outputs(body: dict[str, Any]) -> str | None:
    """vLLM's `structured_outputs` {json | regex | choice | grammar}: a grammar, or None."""
    so = body.get("structured_outputs")
    if so is None:
        return None
    so = _require(so, dict, "structured_outputs")
    given = [k for k in ("json", "regex", "choice", "grammar") if so.get(k) is not None]
    if len(given) != 1:
        raise bad_request("'structured_outputs' takes exactly one of json, regex, choice, grammar.",
                          "structured_outputs", "invalid_value")
    kind, value = given[0], so[given[0]]
    param = f"structured_outputs.{kind}"
    if kind == "json":
        try:
            return schema_grammar(json.loads(value) if isinstance(value, str) else value, False)
        except json.JSONDecodeError as e:
            raise bad_request(f"'{param}' is not valid JSON: {e}", param, "invalid_json") from None
        except SchemaError as e:
            raise _schema_error(e, param) from None
    if kind == "choice":
        choices = _require(value, list, param)
        if not choices or not all(isinstance(c, str) for c in choices):
            raise bad_request(f"'{param}' must be a non-empty array of strings.", param,
                              "invalid_value")
        lark = "start: " + " | ".join(json.dumps(c, ensure_ascii=False) for c in choices)
    elif kind == "regex":
        from llguidance import regex_to_lark

        lark = "start: /" + regex_to_lark(_require(value, str, param), "") + "/"
    else:
        lark = _require(value, str, param)
    grammar = LLMatcher.grammar_from_lark(lark)
    error = LLMatcher.validate_grammar(grammar)
    if error:
        raise bad_request(f"Invalid grammar in '{param}': {error}", param, "invalid_grammar")
    return grammar


def _tool_format(parser_name: str | None, tokenizer) -> ToolCallFormat:
    fmt = detect_format(parser_name, chat_template_text(tokenizer))
    if fmt is None:
        raise bad_request(f"Constrained tool calls (tool_choice 'required' or named, strict or "
                          f"custom tools) are not available for the {parser_name!r} tool-call "
                          "format.", "tool_choice", "unsupported")
    return fmt


def build_chat_grammar(body: dict[str, Any], tools_raw: list | None, tool_choice: Any,
                       parallel: bool, parser_name: str | None, tokenizer, backend) -> str | None:
    """The grammar a chat request's fields call for (None: unconstrained). Raises APIError.

    `parser_name` is the server's tool-call parser (it fixes the tool-call format)."""
    vllm = _vllm_structured_outputs(body)
    answer = parse_response_format(body.get("response_format"))
    tools = parse_tools(tools_raw)
    mode, forced = parse_tool_choice(tool_choice, tools)
    if vllm is not None and answer is not None:
        raise bad_request("'structured_outputs' cannot be combined with response_format.",
                          "structured_outputs", "invalid_value")
    if not tools or mode == "none":
        if vllm is not None:
            return vllm
        return schema_grammar(answer.schema, answer.strict) if answer is not None else None
    needs_grammar = mode == "required" or answer is not None or any(
        (isinstance(t, FunctionTool) and t.strict) or (isinstance(t, CustomTool) and t.syntax)
        for t in tools)
    if not needs_grammar:
        return vllm
    if vllm is not None:
        raise bad_request("'structured_outputs' cannot be combined with a required tool_choice "
                          "or with strict or grammar tools.", "structured_outputs", "invalid_value")
    if forced is not None:
        tools, parallel = [t for t in tools if t.name == forced], False
    fmt = _tool_format(parser_name, tokenizer)
    return tool_call_grammar(fmt, tools, mode=mode, parallel=parallel, answer=answer,
                             special_ids=backend.special_token_ids(fmt.markers))


def build_completion_grammar(body: dict[str, Any]) -> str | None:
    vllm = _vllm_structured_outputs(body)
    answer = parse_response_format(body.get("response_format"))
    if vllm is not None and answer is not None:
        raise bad_request("'structured_outputs' cannot be combined with response_format.",
                          "structured_outputs", "invalid_value")
    if answer is not None:
        return schema_grammar(answer.schema, answer.strict)
    return vllm


async def _compiled(ctx, build, *args) -> str | None:
    """Build on a worker thread, then compile with the model's tokenizer (cached for the engine)."""

    def work() -> str | None:
        grammar = build(*args)
        if grammar is not None:
            try:
                ctx.engine.structured.validate(grammar)
            except GrammarError as e:
                raise bad_request(f"The requested output format cannot be enforced: {e}", None,
                                  "invalid_grammar") from None
        return grammar

    return await asyncio.to_thread(work)


async def chat_grammar(ctx, body: dict[str, Any], req, parsing=None) -> str | None:
    """`req` is the parsed ChatRequest (its tools, tool_choice and parallel_tool_calls);
    `parsing` its RequestParsing: with a reasoning parser, the model may think first."""
    tool_format = ctx.output_parsing.tool_format
    reasoning = getattr(parsing, "reasoning", None)
    think = None if reasoning is None else (reasoning.start, reasoning.end, parsing.in_reasoning)

    def build() -> str | None:
        grammar = build_chat_grammar(body, req.tools, req.tool_choice, req.parallel_tool_calls,
                                     tool_format.name if tool_format else None, ctx.tokenizer,
                                     ctx.engine.structured)
        if grammar is None or think is None:
            return grammar
        start, end, opened = think
        return after_reasoning(grammar, start, end, opened,
                               ctx.engine.structured.special_token_ids((start, end)))

    return await _compiled(ctx, build)


async def completion_grammar(ctx, body: dict[str, Any]) -> str | None:
    return await _compiled(ctx, build_completion_grammar, body)
