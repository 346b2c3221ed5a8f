"""Typed tool-call argument values for the XML-style formats (Qwen3-Coder, GLM-4.5+).

Those formats write every value as text; the declared JSON-schema type of the parameter in the
request's `tools` says how to read it back (vLLM's rule): a string stays a string, numbers,
booleans, objects and arrays are parsed, and a value that does not parse as its type stays the raw
string.
Parameters the schema does not declare stay strings: guessing would turn the string "123" into 123.
`null` reads as None for any declared type but a plain string (vLLM: None for every type).
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

_ORDER = ("boolean", "integer", "number", "object", "array")


def parameter_schema(tools: Sequence[Mapping[str, Any]] | None, function: str,
                     parameter: str) -> Mapping[str, Any] | None:
    """The JSON schema of `function`'s `parameter` in an OpenAI `tools` list, if declared."""
    for tool in tools or ():
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(fn, Mapping) or fn.get("name") != function:
            continue
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, Mapping) else None
        schema = props.get(parameter) if isinstance(props, Mapping) else None
        return schema if isinstance(schema, Mapping) else None
    return None


def declared_types(schema: Mapping[str, Any] | None) -> list[str]:
    """JSON types a schema allows, from `type` (a name or a list) and `anyOf`/`oneOf` branches."""
    if not schema:
        return []
    kind = schema.get("type")
    types = [kind] if isinstance(kind, str) else [t for t in kind if isinstance(t, str)] \
        if isinstance(kind, list) else []
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key) or ():
            if isinstance(branch, Mapping):
                types += [t for t in declared_types(branch) if t not in types]
    if not types:
        if "properties" in schema:
            types = ["object"]
        elif "items" in schema:
            types = ["array"]
    return types


def _as_json_value(value: Any) -> Any:
    """`value` if it serializes as strict JSON (no NaN, no sets or bytes from literal_eval)."""
    json.dumps(value, allow_nan=False)
    return value


def _convert(text: str, kind: str) -> Any:
    """`text` read as JSON type `kind`; raises ValueError when it is not one."""
    s = text.strip()
    if kind == "boolean":
        if s.lower() in ("true", "false"):  # templates that print Python values write True/False
            return s.lower() == "true"
    elif kind in ("integer", "number"):
        value = json.loads(s)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(s)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(s)
            if kind == "integer":
                if not value.is_integer():
                    raise ValueError(s)
                return int(value)
        return value
    else:  # object / array: JSON, or a Python literal (models trained on Python reprs)
        want = dict if kind == "object" else list
        try:
            value = json.loads(s)
        except ValueError:
            value = ast.literal_eval(s)
        if isinstance(value, want):
            return _as_json_value(value)
    raise ValueError(s)


def convert_parameter(text: str, schema: Mapping[str, Any] | None) -> Any:
    """A parameter's text as the value its schema declares; the raw string when nothing fits."""
    types = declared_types(schema)
    if text.strip().lower() == "null" and types and types != ["string"]:
        return None
    for kind in _ORDER:
        if kind in types:
            try:
                return _convert(text, kind)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
    return text
