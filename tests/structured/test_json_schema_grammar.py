"""JSON-schema grammars with the real Qwen and DeepSeek tokenizers: what they accept agrees with
`jsonschema`, random models driven through them always produce valid documents, strict mode
closes objects and names the path of anything it cannot enforce."""

from __future__ import annotations

import copy
import json

import pytest
from structured_fixtures import (SCHEMAS, accepts, decode_json, generate, replay_allowed, tiny_lm,
                                 tokenizer_and_backend, validator)

from dgjax.structured.json_schema import SchemaError, json_pointer, schema_grammar

SEEDS = range(24)


@pytest.mark.parametrize("tokenizer", ["qwen", "deepseek"])
def test_random_model_output_always_parses_and_validates(tokenizer):
    tok, backend = tokenizer_and_backend(tokenizer)
    names = sorted(SCHEMAS)
    for seed in SEEDS:
        name = names[seed % len(names)]
        schema = SCHEMAS[name]
        grammar = schema_grammar(schema, strict=seed % 3 != 0)
        ids, ended = generate(backend, grammar, tiny_lm(backend.vocab_size, seed % 4), seed)
        assert ended, f"{name} seed {seed}: no end after {len(ids)} tokens"
        doc = decode_json(tok, ids)
        errors = [e.message for e in validator(schema).iter_errors(doc)]
        assert not errors, f"{name} seed {seed}: {doc} {errors}"
        assert replay_allowed(backend, grammar, ids), f"{name} seed {seed}"


# (schema, candidate documents): the grammar must accept exactly those jsonschema finds valid.
AGREEMENT = [
    ({"type": "integer", "minimum": -3, "maximum": 12},
     ["-3", "12", "0", "-4", "13", "1.5", "7"]),
    ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 2},
     ["0", "2", "0.5", "1.999", "-0.1", "2.0", "1"]),
    ({"type": "integer", "multipleOf": 3, "minimum": 0, "maximum": 20},
     ["0", "3", "18", "4", "21", "-3"]),
    ({"type": "number", "multipleOf": 0.25, "minimum": 0, "maximum": 2},
     ["0.25", "1.5", "0.3", "2", "2.25", "1.75"]),
    ({"type": "string", "pattern": "^[a-c]{2}[0-9]$"},
     ['"ab1"', '"cc9"', '"ad1"', '"ab"', '"abc1"']),
    ({"enum": ["x", 2, None, True]}, ['"x"', "2", "null", "true", '"y"', "3", "false"]),
    ({"const": {"k": [1, 2]}}, ['{"k": [1, 2]}', '{"k": [1]}', '{"k": [2, 1]}']),
    ({"anyOf": [{"type": "integer", "maximum": 5}, {"type": "string", "maxLength": 2}]},
     ["4", "6", '"ab"', '"abc"', "true"]),
    ({"oneOf": [{"type": "object", "properties": {"t": {"const": "a"}}, "required": ["t"],
                 "additionalProperties": False},
                {"type": "object", "properties": {"t": {"const": "b"}, "n": {"type": "integer"}},
                 "required": ["t", "n"], "additionalProperties": False}]},
     ['{"t": "a"}', '{"t": "b", "n": 1}', '{"t": "b"}', '{"t": "a", "n": 1}', '{"t": "c"}']),
    ({"$defs": {"pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                         "items": False}},
      "type": "object", "properties": {"p": {"$ref": "#/$defs/pair"}}, "required": ["p"],
      "additionalProperties": False},
     ['{"p": [1, "a"]}', '{"p": ["a", 1]}', '{"p": [1, "a", 2]}', '{"p": [1, "a"], "q": 1}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}},
      "additionalProperties": {"type": "boolean"}},
     ['{"a": 1, "b": true}', '{"a": 1, "b": 2}', '{"zz": false}', '{"a": "x"}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
     ['{"a": 1}', '{"a": 1, "extra": [1, {"b": null}]}', '{}']),
    ({"type": "string", "format": "date"}, ['"2024-02-29"', '"2024-13-01"', '"24-01-01"']),
    ({"type": "string", "format": "ipv4"}, ['"10.0.0.255"', '"256.1.1.1"', '"1.2.3"']),
    ({"type": "string", "format": "uuid"},
     ['"123e4567-e89b-12d3-a456-426614174000"', '"123e4567e89b12d3a456426614174000"']),
    ({"type": "string", "format": "email"}, ['"a.b@example.com"', '"no-at-sign"']),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2},
     ["[1]", "[1, 2]", "[]", "[1, 2, 3]", '["a"]']),
]


# Valid documents llguidance does not generate (it is stricter, never looser): a decimal
# multipleOf is written with exactly its number of decimals ("1.50", not "1.5").
STRICTER_THAN_JSONSCHEMA = {'{"type": "number", "multipleOf": 0.25, "minimum": 0, "maximum": 2}': {"1.5"}}


@pytest.mark.parametrize("case", range(len(AGREEMENT)))
def test_grammar_accepts_exactly_what_jsonschema_validates(case):
    schema, docs = AGREEMENT[case]
    _, backend = tokenizer_and_backend("qwen")
    grammar = schema_grammar(schema, strict=False)
    known_stricter = STRICTER_THAN_JSONSCHEMA.get(json.dumps(schema), set())
    for doc in docs:
        valid = validator(schema).is_valid(json.loads(doc))
        accepted = accepts(backend, grammar, doc)
        assert valid or not accepted, f"accepts invalid {doc} for {schema}"
        assert accepted or not valid or doc in known_stricter, f"rejects valid {doc} for {schema}"


def test_strict_mode_allows_only_declared_properties_unless_the_schema_opens_the_object():
    _, backend = tokenizer_and_backend("deepseek")
    open_by_default = {"type": "object", "properties": {"a": {"type": "integer"},
                                                        "inner": {"type": "object"}}}
    grammar = schema_grammar(open_by_default, strict=True)
    assert accepts(backend, grammar, '{"a": 1, "inner": {}}')
    assert not accepts(backend, grammar, '{"a": 1, "b": 2}')
    assert not accepts(backend, grammar, '{"a": 1, "inner": {"x": 1}}')
    assert accepts(backend, schema_grammar(open_by_default, strict=False), '{"a": 1, "b": 2}')
    explicitly_open = dict(copy.deepcopy(open_by_default), additionalProperties={"type": "string"})
    grammar = schema_grammar(explicitly_open, strict=True)
    assert accepts(backend, grammar, '{"a": 1, "b": "x"}')
    assert not accepts(backend, grammar, '{"a": 1, "b": 2}')


def test_whitespace_allows_compact_and_pretty_json_but_no_blank_runs():
    _, backend = tokenizer_and_backend("qwen")
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    grammar = schema_grammar(schema, strict=True)
    assert accepts(backend, grammar, '{"a":[1,2]}')
    assert accepts(backend, grammar, '{"a": [1, 2]}')
    assert accepts(backend, grammar, json.dumps({"a": [1, 2]}, indent=4))
    assert not accepts(backend, grammar, '{\n\n"a": [1]}')
    assert not accepts(backend, grammar, '{"a":  [1]}')
    assert not accepts(backend, grammar, "{\n" + " " * 33 + '"a": [1]}')


# (schema, path of the subschema at fault): strict refuses, naming it; non-strict ignores it.
UNSUPPORTED = [
    ({"type": "object", "properties": {"b": {"type": "object", "properties": {
        "a": {"not": {"type": "string"}}}}}}, ("properties", "b", "properties", "a")),
    ({"type": "array", "items": {"type": "array", "uniqueItems": True}}, ("items",)),
    ({"$defs": {"d": {"type": "object", "dependentRequired": {"x": ["y"]}}},
      "type": "object", "properties": {"q": {"$ref": "#/$defs/d"}}}, ("$defs", "d")),
    ({"anyOf": [{"type": "integer"}, {"type": "array", "contains": {"type": "integer"}}]},
     ("anyOf", 1)),
    ({"type": "object", "properties": {"s": {"type": "string", "format": "credit-card"}}},
     ("properties", "s")),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "(?=a)ab"}}},
     ("properties", "s")),
    ({"type": "object", "properties": {"n": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}},
     ("properties", "n")),
]


@pytest.mark.parametrize("case", range(len(UNSUPPORTED)))
def test_strict_mode_names_the_path_of_what_it_cannot_enforce(case):
    schema, path = UNSUPPORTED[case]
    with pytest.raises(SchemaError) as info:
        schema_grammar(schema, strict=True)
    assert info.value.path == path
    assert json_pointer(path) in str(info.value)
    _, backend = tokenizer_and_backend("qwen")
    backend.validate(schema_grammar(schema, strict=False))  # lenient: ignored, not refused
