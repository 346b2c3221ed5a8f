"""Structured output over real HTTP (uvicorn + the real engine on tiny-chat, whose chat template
uses the Hermes tool-call format): response_format, strict and custom tools, tool_choice, the
OpenAI SDK's `parse` helper, errors that name the schema path, and constrained requests running
alongside unconstrained ones."""

from __future__ import annotations

import json
import re
import threading
from typing import Literal

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field

from dgjax.structured.tool_formats import split_hermes_custom_call
from serving_harness import SERVED_NAME, sse_chunks

MESSAGES = [{"role": "user", "content": "Describe a person as JSON."}]
PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 10},
    "age": {"type": "integer", "minimum": 0, "maximum": 99},
    "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3},
    "tall": {"type": "boolean"}}, "required": ["name", "age", "pets", "tall"]}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "strict": True, "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}},
        "required": ["city", "unit"]}}}
CODE_RE = r"[A-Z]{3}-[0-9]{2}"
CODE_TOOL = {"type": "custom", "custom": {"name": "lookup_code", "format": {
    "type": "grammar", "grammar": {"syntax": "regex", "definition": CODE_RE}}}}


def post(http, path: str = "/v1/chat/completions", **body):
    return http.post(path, json={"model": SERVED_NAME, **body})


def chat(http, **body) -> dict:
    r = post(http, messages=body.pop("messages", MESSAGES), **body)
    assert r.status_code == 200, r.text
    return r.json()


def schema_format(schema: dict, strict: bool = True) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": strict}}


def is_valid(schema: dict, doc) -> bool:
    return Draft202012Validator(schema).is_valid(doc)


@pytest.mark.parametrize("seed", range(4))
def test_json_schema_response_is_schema_valid(http, seed):
    out = chat(http, response_format=schema_format(PERSON), temperature=1.0, seed=seed,
               max_tokens=120, n=2)
    for choice in out["choices"]:
        assert choice["finish_reason"] == "stop"
        doc = json.loads(choice["message"]["content"])
        assert is_valid(PERSON, doc) and set(doc) <= set(PERSON["properties"]), doc


def test_streamed_json_schema_response_is_schema_valid(http):
    r = post(http, messages=MESSAGES, stream=True, response_format=schema_format(PERSON),
             temperature=1.0, seed=7, max_tokens=120)
    assert r.status_code == 200, r.text
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in sse_chunks(r)
                   if c["choices"])
    assert is_valid(PERSON, json.loads(text))


def test_json_object_response_is_an_object(http):
    out = chat(http, response_format={"type": "json_object"}, temperature=0.0, max_tokens=80)
    choice = out["choices"][0]
    if choice["finish_reason"] == "stop":
        assert isinstance(json.loads(choice["message"]["content"]), dict)
    else:  # cut by max_tokens: still a prefix of an object
        assert choice["message"]["content"].lstrip().startswith("{")


def test_completions_endpoint_honours_response_format(http):
    r = post(http, "/v1/completions", prompt="A person:", response_format=schema_format(PERSON),
             temperature=1.0, seed=3, max_tokens=120)
    assert r.status_code == 200, r.text
    assert is_valid(PERSON, json.loads(r.json()["choices"][0]["text"]))


def test_strict_unsupported_keyword_is_a_400_naming_the_schema_path(http):
    schema = {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2,
                 "uniqueItems": True}}, "required": ["tags"], "additionalProperties": False}
    r = post(http, messages=MESSAGES, response_format=schema_format(schema), max_tokens=40)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["param"] == "response_format.json_schema.schema.properties.tags"
    assert "response_format.json_schema.schema.properties.tags" in err["message"]
    assert "uniqueItems" in err["message"]
    # non-strict: the keyword is ignored and the rest enforced
    out = chat(http, response_format=schema_format(schema, strict=False), temperature=1.0,
               seed=1, max_tokens=60)
    doc = json.loads(out["choices"][0]["message"]["content"])
    assert isinstance(doc["tags"], list) and len(doc["tags"]) <= 2


def test_strict_tool_schema_and_bad_custom_grammar_are_400s_naming_the_field(http):
    bad_tool = {"type": "function", "function": {"name": "f", "strict": True, "parameters": {
        "type": "object", "properties": {"x": {"not": {"type": "null"}}}}}}
    r = post(http, messages=MESSAGES, tools=[WEATHER_TOOL, bad_tool], tool_choice="required")
    assert r.status_code == 400 and r.json()["error"]["param"] == \
        "tools[1].function.parameters.properties.x", r.text
    bad_custom = {"type": "custom", "custom": {"name": "c", "format": {"type": "grammar",
                  "grammar": {"syntax": "lark", "definition": "start: missing_rule"}}}}
    r = post(http, messages=MESSAGES, tools=[bad_custom], tool_choice="required")
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "tools[0].custom.format.grammar.definition"


def test_openai_sdk_parse_returns_a_pydantic_object(server):
    class Pet(BaseModel):
        name: str = Field(max_length=8)
        kind: Literal["cat", "dog"]
        age: int = Field(ge=0, le=30)

    client = server.openai()
    completion = client.chat.completions.parse(
        model=SERVED_NAME, messages=[{"role": "user", "content": "A pet, please."}],
        response_format=Pet, max_tokens=80, temperature=1.0, seed=5)
    pet = completion.choices[0].message.parsed
    assert isinstance(pet, Pet) and pet.kind in ("cat", "dog") and 0 <= pet.age <= 30


def _args_ok(call: dict) -> bool:
    schema = WEATHER_TOOL["function"]["parameters"]
    args = json.loads(call["function"]["arguments"])
    return is_valid(schema, args) and set(args) <= set(schema["properties"])


@pytest.mark.parametrize("tool_choice", ["required",
                                         {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_tool_calls_are_valid_calls(http, tool_choice):
    other = {"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}}
    for seed in range(3):
        out = chat(http, messages=[{"role": "user", "content": "Weather in Oslo?"}],
                   tools=[WEATHER_TOOL, other], tool_choice=tool_choice, temperature=1.0,
                   seed=seed, max_tokens=120, parallel_tool_calls=False)
        choice = out["choices"][0]
        calls = choice["message"]["tool_calls"]
        assert choice["finish_reason"] == "tool_calls" and len(calls) == 1, choice
        if isinstance(tool_choice, dict) or calls[0]["function"]["name"] == "get_weather":
            assert calls[0]["function"]["name"] == "get_weather" and _args_ok(calls[0])


def test_named_custom_tool_input_matches_its_grammar(http):
    for seed in range(3):
        out = chat(http, messages=[{"role": "user", "content": "Look up the code."}],
                   tools=[WEATHER_TOOL, CODE_TOOL], temperature=1.0, seed=seed, max_tokens=60,
                   tool_choice={"type": "custom", "custom": {"name": "lookup_code"}})
        message = out["choices"][0]["message"]
        custom = [c for c in message["tool_calls"] if c.get("type") == "custom"]
        if custom:  # a tool parser that returns custom calls
            name, raw = custom[0]["custom"]["name"], custom[0]["custom"]["input"]
        else:
            body = re.fullmatch(r"<tool_call>\n(.*)\n</tool_call>", message["content"], re.DOTALL)
            name, raw = split_hermes_custom_call(body.group(1))
        assert name == "lookup_code" and re.fullmatch(CODE_RE, raw), message


def test_tools_with_response_format_give_a_call_or_the_json_answer(http):
    for seed in range(4):
        out = chat(http, tools=[WEATHER_TOOL], response_format=schema_format(PERSON),
                   temperature=1.0, seed=seed, max_tokens=120)
        message = out["choices"][0]["message"]
        if message["tool_calls"]:
            assert all(_args_ok(c) for c in message["tool_calls"])
        else:
            assert is_valid(PERSON, json.loads(message["content"]))


def test_vllm_structured_outputs_choice(http):
    out = chat(http, structured_outputs={"choice": ["alpha", "beta", "gamma"]}, temperature=1.0,
               seed=2, max_tokens=10)
    assert out["choices"][0]["message"]["content"] in ("alpha", "beta", "gamma")


def test_constrained_and_unconstrained_requests_concurrently(server):
    free = dict(messages=[{"role": "user", "content": "Tell me about the for statement."}],
                max_tokens=24, temperature=0.9, seed=42, ignore_eos=True)
    with server.client() as c:
        alone = chat(c, **free)["choices"][0]["message"]["content"]
    results: dict[str, object] = {}

    def run(key, body):
        with server.client() as c:
            results[key] = chat(c, **body)

    jobs = [("free", free)] + [(f"json{i}", dict(response_format=schema_format(PERSON),
                                                 temperature=1.0, seed=i, max_tokens=120))
                               for i in range(3)]
    threads = [threading.Thread(target=run, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results["free"]["choices"][0]["message"]["content"] == alone
    for i in range(3):
        assert is_valid(PERSON, json.loads(results[f"json{i}"]["choices"][0]["message"]["content"]))
