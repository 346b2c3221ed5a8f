"""Lark rules for tool-call arguments written as tagged blocks (Qwen3-Coder, GLM-4.5), not JSON.

Each declared parameter is one block, in declaration order, required ones always present:
`param_begin(key) VALUE value_end`. The server's parsers (`text.tool_parsers.qwen3_coder`,
`glm45`) read VALUE back by the parameter's declared type (`tool_parsers.arguments`): a plain
string stays the raw text, every other type is parsed as JSON. So the grammar writes
- string parameters (and untyped ones that only allow strings) as raw text, constrained by their
  `enum` / `const` / `pattern` / `minLength` / `maxLength`, never containing the text at which the
  parser cuts the value (`XmlArguments.closing`, the call's end marker);
- other types as JSON of their schema (strict or lenient, as `json_schema.lark_json`);
- a union of string and other types (`["string", "null"]`) as either.
What cannot be read back as the schema says is a SchemaError in strict mode (a `format` on a raw
string, an untyped `$ref`); in non-strict mode it is relaxed to raw text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from dgjax.structured.json_schema import SchemaError, lark_json
from dgjax.structured.tool_formats import XmlArguments
from dgjax.text.tool_parsers.arguments import declared_types

__all__ = ["xml_arguments_rule"]

_ANNOTATIONS = {"description", "title", "examples", "default", "$comment", "deprecated"}
_ANY = r"(.|\n)"
_REGEX_META = set("\\.^$|?*+()[]{}/-")


def _regex_literal(s: str) -> str:
    return "".join("\\n" if c == "\n" else "\\" + c if c in _REGEX_META else c for c in s)


def _pattern(pattern: str) -> str:
    """A JSON-schema pattern (a search, anchored only where it says so) as a whole-text regex."""
    from llguidance import regex_to_lark

    head = "" if pattern.startswith("^") else _ANY + "*"
    body = pattern.removeprefix("^")
    tail = ""
    if body.endswith("$") and not body.endswith("\\$"):
        body = body[:-1]
    else:
        tail = _ANY + "*"
    return f"/{head}({regex_to_lark(body, '')}){tail}/"


class _Params:
    def __init__(self, rule: str, style: XmlArguments, text: Callable[[str], str],
                 split_at_special: Callable[[str], tuple[str, str]], forbidden: list[str],
                 strict: bool, defs: dict[str, Any]) -> None:
        self.rule, self.style, self.text = rule, style, text
        self.split_at_special = split_at_special
        self.forbidden = forbidden  # substrings a raw value may not contain
        self.strict, self.defs = strict, defs
        self.rules: list[str] = []

    def refuse(self, path: tuple, detail: str) -> None:
        if self.strict:
            raise SchemaError("not enforceable in this tool-call format", path, detail)

    def raw_terminal(self, name: str, schema: Mapping[str, Any], path: tuple) -> str:
        """A terminal for raw string text satisfying `schema`'s string keywords."""
        allowed = None
        if "const" in schema:
            allowed = [schema["const"]]
        elif "enum" in schema:
            allowed = list(schema["enum"])
        if allowed is not None:
            texts = [v for v in allowed if isinstance(v, str)
                     and not any(f in v for f in self.forbidden)]
            if len(texts) != len(allowed):
                self.refuse(path, "a raw-text value can only be one of its allowed strings, "
                                  "and none may contain the value's closing tag")
            if texts:
                self.rules.append(f"{name}: " + " | ".join(json.dumps(t, ensure_ascii=False)
                                                           for t in texts))
                return name
        parts = []
        if isinstance(schema.get("pattern"), str):
            parts.append(_pattern(schema["pattern"]))
        lo, hi = schema.get("minLength"), schema.get("maxLength")
        if isinstance(lo, int) or isinstance(hi, int):
            parts.append(f"/{_ANY}{{{lo if isinstance(lo, int) else 0},"
                         f"{hi if isinstance(hi, int) else ''}}}/")
        if "format" in schema:
            self.refuse(path + ("format",), "a string 'format' cannot be enforced on a raw-text "
                                            "value")
        if self.forbidden:
            either = "|".join(_regex_literal(f) for f in self.forbidden)
            parts.append(f"~/{_ANY}*({either}){_ANY}*/")
        self.rules.append(f"{name}: " + (" & ".join(parts) or f"/{_ANY}*/"))
        return name

    def raw_value(self, i: int, schema: Mapping[str, Any], path: tuple) -> str:
        """Lark items: raw text and the value's end (the lazy lexeme ends at the first end)."""
        term = self.raw_terminal(f"{self.rule.upper()}_P{i}_RAW", schema, path)
        closing, special_rest = self.split_at_special(self.style.value_end)
        if not closing:
            return f"{term} {self.text(special_rest)}"
        lazy = f"{self.rule}_p{i}_raw"
        self.rules.append(f"{lazy}[lazy]: {term} {self.text(closing)}")
        return f"{lazy} {self.text(special_rest)}"

    def json_value(self, schema: Mapping[str, Any], path: tuple) -> str:
        try:
            value = lark_json({**schema, **self.defs}, self.strict)
        except SchemaError as e:
            raise SchemaError(e.reason, path + e.path, e.detail, e.droppable) from None
        return f"{value} {self.text(self.style.value_end)}"

    def value(self, i: int, schema: Any, path: tuple) -> str:
        if not isinstance(schema, Mapping):
            schema = {}
        types = declared_types(schema)
        if not types:
            values = schema.get("enum", [schema["const"]] if "const" in schema else None)
            if values is None and not set(schema) <= _ANNOTATIONS:
                self.refuse(path, "a parameter without a declared 'type' is read back as raw text")
                schema = {}
            return self.raw_value(i, schema, path)
        if "string" not in types:
            return self.json_value(schema, path)
        if types == ["string"]:
            return self.raw_value(i, schema, path)
        # a union with strings: the parser tries the other types first, then keeps the text
        rest = [t for t in types if t != "string"]
        if isinstance(schema.get("type"), list):
            other = {**schema, "type": rest if len(rest) > 1 else rest[0]}
            string = schema
        else:
            key = "anyOf" if "anyOf" in schema else "oneOf"
            branches = [b for b in schema.get(key) or () if isinstance(b, Mapping)]
            strings = [b for b in branches if declared_types(b) == ["string"]]
            others = [b for b in branches if "string" not in declared_types(b)]
            if len(strings) + len(others) != len(branches) or len(strings) != 1:
                self.refuse(path, "a union mixing strings and other types this way cannot be "
                                  "read back exactly")
            string = strings[0] if strings else {}
            other = {**{k: v for k, v in schema.items() if k != key}, "anyOf": others}
        return f"({self.raw_value(i, string, path)} | {self.json_value(other, path)})"


def xml_arguments_rule(rule: str, parameters: Any, strict: bool, style: XmlArguments,
                       text: Callable[[str], str],
                       split_at_special: Callable[[str], tuple[str, str]],
                       forbidden: list[str]) -> tuple[str, list[str]]:
    """(Lark items for one function's argument blocks, the rules they use). `text` turns literal
    text into Lark items (special-token markers by id), `split_at_special` splits a closing text
    at its first special marker, `forbidden` are non-special texts a raw value may not contain.
    Raises SchemaError with the path inside `parameters`."""
    schema = parameters if isinstance(parameters, Mapping) else {}
    props = schema.get("properties") or {}
    required = [r for r in schema.get("required") or () if isinstance(r, str)]
    if not isinstance(props, Mapping):
        props = {}
    missing = [r for r in required if r not in props]
    if missing:
        if strict:
            raise SchemaError("required property not declared", ("required",),
                              f"{missing} must be listed in 'properties'")
        props = {**props, **{r: {} for r in missing}}
    defs = {k: schema[k] for k in ("$defs", "definitions") if k in schema}
    p = _Params(rule, style, text, split_at_special, forbidden, strict, defs)
    items = []
    for i, (key, sub) in enumerate(props.items()):
        block = f"{rule}_p{i}"
        p.rules.append(f"{block}: {text(style.param_begin(key))} "
                       f"{p.value(i, sub, ('properties', key))}")
        items.append(block if key in required else f"{block}?")
    return " ".join(items), p.rules
