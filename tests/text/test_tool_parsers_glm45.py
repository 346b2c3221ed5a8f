"""GLM-4.5 / 4.7 tool calls (`<arg_key>`/`<arg_value>`): typed by the tool schema; whole outputs and
streams agree."""

from __future__ import annotations

import pytest
from tool_call_checks import check_parse
from tool_call_checks import render_glm as glm

from dgjax.text.tool_parsers import Glm45ToolCallFormat

FMT = Glm45ToolCallFormat()
TOOLS = [{"type": "function", "function": {"name": "book_flight", "parameters": {
    "type": "object", "properties": {
        "origin": {"type": "string"}, "seats": {"type": "integer"},
        "budget": {"type": "number"}, "flexible": {"type": "boolean"},
        "extras": {"type": "object"}, "stops": {"type": "array"}}}}}]
ARGS = {"origin": "  São Paulo, gate 7 ", "seats": 2, "budget": 1234.5, "flexible": True,
        "extras": {"meal": "vegan", "bags": [1, 2]}, "stops": ["LIS", "FRA"]}


@pytest.mark.parametrize("compact", [False, True], ids=["glm45", "glm47"])
def test_typed_values_round_trip(compact):
    text = "Booking now.\n" + glm("book_flight", ARGS, compact)
    assert check_parse(FMT, text, TOOLS) == ("Booking now.", [("book_flight", ARGS)])


def test_padded_typed_values_and_fallbacks():
    text = ("<tool_call>book_flight\n<arg_key> seats </arg_key>\n<arg_value> 3 </arg_value>\n"
            "<arg_key>budget</arg_key><arg_value>cheap</arg_value>"
            "<arg_key>flexible</arg_key><arg_value>False</arg_value></tool_call>")
    expected = {"seats": 3, "budget": "cheap", "flexible": False}
    assert check_parse(FMT, text, TOOLS) == ("", [("book_flight", expected)])


def test_call_without_arguments_and_parallel_calls():
    text = glm("list_flights", {}) + "\n" + glm("book_flight", ARGS) + "\n"
    calls = [("list_flights", {}), ("book_flight", ARGS)]
    assert check_parse(FMT, text, TOOLS) == ("", calls)
    assert check_parse(FMT, text, TOOLS, parallel=False) == ("", calls[:1])


def test_duplicate_keys_keep_the_last_value():
    pairs = [("origin", "OSL"), ("seats", "1"), ("origin", "BER")]
    text = "<tool_call>book_flight" + "".join(
        f"\n<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>" for k, v in pairs) + \
        "\n</tool_call>"
    expected = dict([("origin", "OSL"), ("seats", 1), ("origin", "BER")])
    assert check_parse(FMT, text, TOOLS) == ("", [("book_flight", expected)])


@pytest.mark.parametrize("bad_block", [
    "<tool_call>book_flight\n<arg_key>seats</arg_key>\n<arg_value>2\n</tool_call>",
    "<tool_call>book_flight\n<arg_key>seats</arg_key>\n</tool_call>",
    "<tool_call>book_flight\nnote: <arg_key>seats</arg_key><arg_value>2</arg_value></tool_call>",
    '<tool_call>\n{"name": "book_flight", "arguments": {}}\n</tool_call>',
    "<tool_call>\n</tool_call>",
    "<tool_call>book_flight\n<arg_key>seats</arg_key><arg_value>2</arg_value>",
])
def test_malformed_or_unterminated_calls_are_content(bad_block):
    text = "Trying.\n" + bad_block
    assert check_parse(FMT, text, TOOLS) == (text, [])
