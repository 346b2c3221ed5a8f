"""Qwen3-Coder XML tool calls: typed by the tool schema; whole outputs and streams agree."""

from __future__ import annotations

import pytest
from tool_call_checks import check_parse, render_qwen3_coder, template_value

from dgjax.text.tool_parsers import Qwen3CoderToolCallFormat

FMT = Qwen3CoderToolCallFormat()
PROPERTIES = {
    "path": {"type": "string"},
    "line": {"type": "integer"},
    "scale": {"type": "number"},
    "dry_run": {"type": "boolean"},
    "options": {"type": "object", "properties": {"mode": {"type": "string"}}},
    "tags": {"type": "array", "items": {"type": "string"}},
    "note": {"type": ["string", "null"]},
    "count": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
}
TOOLS = [{"type": "function", "function": {"name": "edit_file", "parameters": {
    "type": "object", "properties": PROPERTIES}}},
    {"type": "function", "function": {"name": "list_dir", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}}}}]
EDIT = {"path": "42", "line": 7, "scale": 0.5, "dry_run": False, "options": {"mode": "a <b>"},
        "tags": ["x", "y"], "note": "\nfirst line\n  indented\n", "count": None}


def coder(name: str, params: list[tuple[str, str]]) -> str:
    """A call with parameter values given as raw text (duplicates allowed)."""
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params)
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"




def test_typed_values_round_trip_through_the_schema():
    text = render_qwen3_coder("edit_file", EDIT)
    assert text == coder("edit_file", [(k, template_value(v)) for k, v in EDIT.items()])
    assert check_parse(FMT, text, TOOLS) == ("", [("edit_file", EDIT)])


def test_python_style_values_from_templates_that_print_with_string_filter():
    params = [("dry_run", "True"), ("line", "3"), ("options", "{'mode': 'w', 'ok': True}"),
              ("tags", "['a', 'b']")]
    expected = {"dry_run": True, "line": 3, "options": {"mode": "w", "ok": True},
                "tags": ["a", "b"]}
    assert check_parse(FMT, coder("edit_file", params), TOOLS) == ("", [("edit_file", expected)])


def test_values_that_do_not_fit_their_type_stay_raw_strings():
    params = [("line", "ten"), ("scale", "1.5x"), ("dry_run", "maybe"), ("options", "{bad"),
              ("tags", "{'a': 1}"), ("scale", "NaN")]
    expected = dict(params)  # later duplicates win, as in the parser
    assert check_parse(FMT, coder("edit_file", params), TOOLS) == ("", [("edit_file", expected)])


def test_null_is_none_for_typed_parameters_but_a_string_for_plain_strings():
    params = [("note", "null"), ("count", "null"), ("line", "null"), ("path", "null")]
    expected = {"note": None, "count": None, "line": None, "path": "null"}
    assert check_parse(FMT, coder("edit_file", params), TOOLS) == ("", [("edit_file", expected)])


def test_undeclared_parameters_and_tools_keep_strings():
    params = [("path", "src"), ("depth", "2")]
    assert check_parse(FMT, coder("list_dir", params), TOOLS) == ("", [("list_dir", dict(params))])
    assert check_parse(FMT, coder("unknown_tool", params), TOOLS) == (
        "", [("unknown_tool", dict(params))])
    assert check_parse(FMT, coder("edit_file", [("line", "5")]), None) == (
        "", [("edit_file", {"line": "5"})])


def test_duplicate_parameters_keep_the_last_value():
    params = [("path", "a.py"), ("line", "1"), ("path", "b.py")]
    expected = {k: v for k, v in [("path", "a.py"), ("line", 1), ("path", "b.py")]}
    assert check_parse(FMT, coder("edit_file", params), TOOLS) == ("", [("edit_file", expected)])


def test_content_then_several_calls_and_parallel_false():
    first = coder("list_dir", [("path", "src")])
    second = render_qwen3_coder("edit_file", EDIT)
    text = "I'll inspect the tree first.\n\n" + first + "\n" + second
    calls = [("list_dir", {"path": "src"}), ("edit_file", EDIT)]
    assert check_parse(FMT, text, TOOLS) == ("I'll inspect the tree first.", calls)
    assert check_parse(FMT, text, TOOLS, parallel=False) == (
        "I'll inspect the tree first.", calls[:1])


@pytest.mark.parametrize("bad_block", [
    "<tool_call>\n<function=list_dir>\n<parameter=path>\nsrc\n</parameter>\n</tool_call>",
    "<tool_call>\n<function=list_dir>\nplease\n<parameter=path>\nsrc\n</parameter>\n"
    "</function>\n</tool_call>",
    "<tool_call>\n<function=list_dir>\n<parameter=path>\nsrc\n</function>\n</tool_call>",
    '<tool_call>\n{"name": "list_dir", "arguments": {"path": "src"}}\n</tool_call>',
    "<tool_call>\n<function=list_dir>\n<parameter=path>\nsrc\n</parameter>\n",
])
def test_malformed_or_unterminated_calls_are_content(bad_block):
    text = "Looking.\n" + bad_block
    assert check_parse(FMT, text, TOOLS) == (text, [])


def test_call_without_parameters():
    assert check_parse(FMT, coder("list_dir", []), TOOLS) == ("", [("list_dir", {})])
