"""JSON schemas -> llguidance grammars, with OpenAI's strict / non-strict meanings.

strict (OpenAI `strict: true`): the whole schema is enforced. An object schema that does not say
`additionalProperties` is closed (only its declared property names), as OpenAI's strict mode
requires, and a keyword or format llguidance cannot enforce is an error that names where in the
schema it sits, because llguidance's own message ("Unimplemented keys: [\"not\"]") does not.
non-strict: standard JSON Schema meanings (unlisted properties allowed); what cannot be enforced
is ignored (llguidance's `lenient` mode, plus dropping what even that refuses), not refused.

Whitespace is bounded: wherever JSON allows it, one space, or one line break followed by at most
`MAX_INDENT` spaces or tabs (enough for compact, `{"a": 1, "b": 2}` and pretty-printed JSON). Unbounded whitespace lets a weak or unlucky
model spin on blank lines until max_tokens without ever closing the value.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from llguidance import LLMatcher

MAX_INDENT = 32
WHITESPACE_PATTERN = r"\r?\n[\x20\x09]{0,%d}|\x20" % MAX_INDENT

# Keywords whose value is one subschema / a name -> subschema map / a list of subschemas.
_SCHEMA_KEYS = ("additionalProperties", "items", "additionalItems", "contains", "propertyNames",
                "not", "if", "then", "else", "unevaluatedItems", "unevaluatedProperties")
_SCHEMA_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LIST_KEYS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")

Path = tuple[str | int, ...]


class SchemaError(ValueError):
    """A schema llguidance cannot enforce; `path` locates the offending subschema."""

    def __init__(self, reason: str, path: Path, detail: str, droppable: tuple[str, ...] = ()) -> None:
        self.reason = reason
        self.path = path
        self.detail = detail
        self.droppable = droppable  # keywords whose removal would let the rest compile
        super().__init__(f"{reason} at {json_pointer(path)}: {detail}")


def json_pointer(path: Path) -> str:
    return "#" + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def dotted(path: Path) -> str:
    """`properties.b.anyOf[1]`: the path as a client would write it after a field name."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def subschemas(schema: Any, path: Path = ()):
    """Every (path, subschema dict) in document order, the root first."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key, value in schema.items():
        if key in _SCHEMA_MAP_KEYS and isinstance(value, dict):
            for name, sub in value.items():
                yield from subschemas(sub, path + (key, name))
        elif key in _SCHEMA_LIST_KEYS and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from subschemas(sub, path + (key, i))
        elif key in _SCHEMA_KEYS:
            yield from subschemas(value, path + (key,))


def _is_object_schema(s: dict) -> bool:
    kind = s.get("type")
    return "properties" in s or kind == "object" or (isinstance(kind, list) and "object" in kind)


def close_objects(schema: Any) -> Any:
    """strict mode: `additionalProperties: false` on every object schema that leaves it open.

    Members of `allOf` are skipped: closing one side of an intersection would forbid the
    properties the other side declares.
    """
    out = copy.deepcopy(schema)
    in_all_of = {p for p, s in subschemas(out) if len(p) >= 2 and p[-2] == "allOf"}
    for path, s in subschemas(out):
        open_keys = ("additionalProperties", "patternProperties", "unevaluatedProperties")
        if path not in in_all_of and _is_object_schema(s) and not any(k in s for k in open_keys):
            s["additionalProperties"] = False
    return out


def compile_options(strict: bool) -> dict[str, Any]:
    opts: dict[str, Any] = {"whitespace_pattern": WHITESPACE_PATTERN}
    if not strict:
        opts["lenient"] = True
    return opts


def prepare_schema(schema: Any, strict: bool) -> dict[str, Any]:
    """The schema as it is handed to llguidance: closed (strict) and with the compile options
    in its top-level `x-guidance` (which llguidance also reads inside a Lark `%json {...}`)."""
    if schema is True:
        schema = {}
    if not isinstance(schema, dict):
        raise SchemaError("invalid JSON schema", (), "a schema must be an object or a boolean")
    prepared = close_objects(schema) if strict else copy.deepcopy(schema)
    prepared["x-guidance"] = {**prepared.get("x-guidance", {}), **compile_options(strict)}
    return prepared


MAX_REPAIRS = 32


def check_schema(schema: Any, strict: bool) -> dict[str, Any]:
    """The prepared schema, checked to compile. strict: raises SchemaError naming the subschema
    llguidance cannot enforce. Non-strict: what lenient mode still refuses (a look-around
    `pattern`, an unsupported `minProperties` ...) is dropped from a copy and the rest enforced;
    only a schema that is wrong in itself (an unknown type, a dangling $ref) raises."""
    prepared = prepare_schema(schema, strict)
    for _ in range(MAX_REPAIRS):
        error = _compile_error(prepared)
        if error is None:
            return prepared
        located = locate_error(prepared, error)
        if strict or not located.droppable:
            raise locate_error(schema, error) if strict else located
        node = _subschema_at(prepared, located.path)
        for key in located.droppable:
            node.pop(key, None)
    raise SchemaError("JSON schema too complex", (), "too many unsupported keywords")


def _compile_error(prepared: dict[str, Any]) -> str | None:
    try:
        grammar = LLMatcher.grammar_from_json_schema(prepared)
    except ValueError as e:
        return str(e)
    failed, messages = LLMatcher.validate_grammar_with_warnings(grammar)
    return messages[0] if failed else None


def schema_grammar(schema: Any, strict: bool) -> str:
    """A complete llguidance grammar for one JSON value matching `schema` (see check_schema)."""
    return LLMatcher.grammar_from_json_schema(check_schema(schema, strict))


def lark_json(schema: Any, strict: bool) -> str:
    """`%json {...}` for embedding a checked schema in a Lark grammar."""
    return "%json " + json.dumps(check_schema(schema, strict), ensure_ascii=False)


def _first(schema: Any, test) -> Path | None:
    for path, s in subschemas(schema):
        if test(s):
            return path
    return None


def locate_error(schema: Any, message: str) -> SchemaError:
    """Turn llguidance's message into a SchemaError that points at the subschema responsible."""
    message = message.strip()
    m = re.search(r"Unimplemented keys: \[(.*?)\]", message)
    if m:
        keys = set(json.loads("[" + m.group(1) + "]"))
        path = _first(schema, lambda s: bool(keys & set(s)))
        if path is not None:
            here = sorted(keys & set(_subschema_at(schema, path)))
            return SchemaError("unsupported JSON schema keyword", path,
                               f"{', '.join(map(repr, here))} cannot be enforced in strict mode "
                               "(set strict to false to ignore it)", tuple(here))
    checks = [  # (message, which subschema, reason, what non-strict mode may drop)
        (r"Unknown format: (.*)$", lambda s, g: s.get("format") == g, "unsupported string format",
         ("format",)),
        (r"Invalid type: (.*)$", lambda s, g: s.get("type") == g or (
            isinstance(s.get("type"), list) and g in s["type"]), "invalid type", ()),
        (r"Pointer '(.*)' does not exist", lambda s, g: s.get("$ref") == "#" + g,
         "unresolved $ref", ()),
    ]
    for pattern, test, reason, droppable in checks:
        m = re.search(pattern, message, re.MULTILINE)
        if m:
            path = _first(schema, lambda s: test(s, m.group(1).strip()))
            if path is not None:
                return SchemaError(reason, path, message, droppable)
    if "regex parse error" in message:
        path = _first(schema, lambda s: isinstance(s.get("pattern"), str) and s["pattern"] in message)
        if path is not None:
            return SchemaError("unsupported pattern", path, message, ("pattern",))
    for keyword, droppable in (("oneOf", ()), ("minProperties", ("minProperties", "maxProperties")),
                               ("maxProperties", ("minProperties", "maxProperties")),
                               ("allOf", ()), ("patternProperties", ())):
        if keyword in message:
            path = _first(schema, lambda s: keyword in s)
            if path is not None:
                return SchemaError(f"unsupported use of {keyword!r}", path, message, droppable)
    return SchemaError("unsupported JSON schema", (), message)


def _subschema_at(schema: Any, path: Path) -> dict:
    node = schema
    for p in path:
        node = node[p]
    return node
