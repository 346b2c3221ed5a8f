"""Schema-typed argument values of the XML-style formats (Qwen3-Coder, GLM)."""

from __future__ import annotations

import json

import pytest

from dgjax.text.tool_parsers.arguments import convert_parameter, declared_types, parameter_schema


@pytest.mark.parametrize("schema,types", [
    ({"type": "integer"}, ["integer"]),
    ({"type": ["number", "null"]}, ["number", "null"]),
    ({"anyOf": [{"type": "string"}, {"oneOf": [{"type": "boolean"}]}]}, ["string", "boolean"]),
    ({"properties": {"a": {}}}, ["object"]),
    ({"items": {"type": "string"}}, ["array"]),
    ({"description": "anything"}, []),
    (None, []),
])
def test_declared_types(schema, types):
    assert declared_types(schema) == types


@pytest.mark.parametrize("text,schema", [
    ("5", {"type": "integer"}), ("5.0", {"type": "integer"}), ("-2e3", {"type": "number"}),
    (" 3.25 ", {"type": "number"}), ("false", {"type": "boolean"}),
    ('{"k": [1, {"z": null}]}', {"type": "object"}), ("[1, \"a\"]", {"type": "array"}),
    ("7", {"type": ["integer", "string"]}), ("null", {"type": "integer"}),
])
def test_json_text_reads_as_its_json_value(text, schema):
    expected = json.loads(text)
    if declared_types(schema) == ["integer"] and isinstance(expected, float):
        expected = int(expected)  # an integral float is the integer it spells
    value = convert_parameter(text, schema)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("text,schema", [
    ("5.5", {"type": "integer"}), ("Infinity", {"type": "number"}), ("true", {"type": "integer"}),
    ("yes", {"type": "boolean"}), ("[1, 2]", {"type": "object"}), ("{1, 2}", {"type": "array"}),
    ("12", {"type": "string"}), ("12", None), ("null", {"type": "string"}),
])
def test_text_that_is_not_its_type_stays_a_string(text, schema):
    assert convert_parameter(text, schema) == text


def test_parameter_schema_lookup():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer"}}}}},
        {"type": "function", "function": {"name": "g"}}, "not a tool"]
    assert parameter_schema(tools, "f", "x") == {"type": "integer"}
    assert parameter_schema(tools, "f", "y") is None
    assert parameter_schema(tools, "g", "x") is None
    assert parameter_schema(None, "f", "x") is None
