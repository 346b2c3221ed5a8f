"""DeepSeek-V3.1 (`NAME<｜tool▁sep｜>{json}`) and V3/R1 (fenced JSON) tool calls."""

from __future__ import annotations

import json

import pytest
from tool_call_checks import check_parse, render_deepseek_v3, render_deepseek_v31

from dgjax.text.tool_parsers import DeepSeekToolCallFormat
from dgjax.text.tool_parsers.deepseek import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, SEP

FMT = DeepSeekToolCallFormat()
CALLS = [("get_weather", {"city": "東京", "when": ["today", "tomorrow"]}),
         ("run_code", {"code": "print('```json')\nprint({'a': 1})"})]


def v31(calls) -> str:
    return CALLS_BEGIN + "".join(render_deepseek_v31(n, a) for n, a in calls) + CALLS_END


def v3(calls) -> str:
    """As the DeepSeek-V3 / R1 chat template writes calls (one per line inside the section)."""
    return CALLS_BEGIN + "\n".join(render_deepseek_v3(n, a) for n, a in calls) + CALLS_END


@pytest.mark.parametrize("render", [v31, v3], ids=["v3.1", "v3"])
def test_content_then_calls(render):
    text = "Let me check both." + render(CALLS)
    assert check_parse(FMT, text) == ("Let me check both.", CALLS)
    assert check_parse(FMT, text, parallel=False) == ("Let me check both.", CALLS[:1])
    assert check_parse(FMT, render(CALLS[:1])) == ("", CALLS[:1])


def test_v31_empty_arguments_and_duplicate_keys():
    raw = '{"a": 1, "a": 2}'
    text = (f"{CALLS_BEGIN}{CALL_BEGIN}now{SEP}{CALL_END}"
            f"{CALL_BEGIN}f{SEP}{raw}{CALL_END}{CALLS_END}")
    assert check_parse(FMT, text) == ("", [("now", {}), ("f", json.loads(raw))])


def test_text_without_calls_and_partial_markers():
    for text in ("Plain answer with a <｜tool▁ fragment and <｜tool▁call", "<｜tool▁calls▁be"):
        assert check_parse(FMT, text) == (text, [])


@pytest.mark.parametrize("bad_call", [
    f"{CALL_BEGIN}get_weather{SEP}{{\"city\": }}{CALL_END}",  # bad JSON
    f"{CALL_BEGIN}get_weather{{\"city\": \"x\"}}{CALL_END}",  # no separator
    f"{CALL_BEGIN}a{SEP}{{}}{SEP}{{}}{CALL_END}",  # two separators
    f"{CALL_BEGIN}get_weather{SEP}[1]{CALL_END}",  # arguments not an object
    f"{CALL_BEGIN}get_weather{SEP}{{\"city\": \"x\"}}",  # unterminated at the end of output
])
def test_malformed_calls_are_content_without_the_section_markers(bad_call):
    end = CALLS_END if bad_call.endswith(CALL_END) else ""
    text = "Checking." + CALLS_BEGIN + bad_call + end
    assert check_parse(FMT, text) == ("Checking." + bad_call, [])
    good_then_bad = CALLS_BEGIN + v31(CALLS[:1])[len(CALLS_BEGIN):-len(CALLS_END)] + bad_call
    assert check_parse(FMT, good_then_bad) == (bad_call, CALLS[:1])
