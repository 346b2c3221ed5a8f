"""Stop strings are found however the stream is split, and never leak into the output."""

from __future__ import annotations

import itertools
import random

import pytest
from text_fixtures import TINY_CHAT_DIR, load_ours
from text_fixtures import stop_reference as reference

from dgjax.text.detokenizer import IncrementalDetokenizer
from dgjax.text.stop import StopStringMatcher


def run(pieces: list[str], stops: list[str], include: bool) -> tuple[str, str | None, list[str]]:
    matcher = StopStringMatcher(stops, include_stop_str_in_output=include)
    emitted, stop = [], None
    for piece in pieces:
        result = matcher.feed(piece)
        emitted.append(result.text)
        if result.stop is not None:
            stop = result.stop
            break
    emitted.append(matcher.flush())
    return "".join(emitted), stop, emitted


CASES = [
    ("Hello world. STOP and more", ["STOP"]),
    ("no stop string here at all", ["STOP", "xyz"]),
    ("aaab", ["aab"]),
    ("abcabd", ["abd", "abc"]),
    ("xx</tool_call>yy", ["</tool_call>", "</tool"]),
    ("ends with partial ST", ["STOP"]),
    ("overlap: abab abababc", ["ababc", "bab "]),
    ("emoji stop 👋🏽 bye 👋 done", ["👋 done", "👋🏽 x"]),
    ("中文停止符号在这里：完。后面", ["完。", "停止符号在那"]),
    ("line\n\nnext\n\n", ["\n\n"]),
    ("STOP at start", ["STOP"]),
]


@pytest.mark.parametrize("text, stops", CASES)
@pytest.mark.parametrize("include", [False, True])
def test_every_single_split_position_gives_the_reference_result(text, stops, include):
    expected_text, expected_stop = reference(text, stops, include)
    for cut in range(len(text) + 1):
        out, stop, _ = run([text[:cut], text[cut:]], stops, include)
        assert (out, stop) == (expected_text, expected_stop), cut
    out, stop, emitted = run(list(text), stops, include)
    assert (out, stop) == (expected_text, expected_stop)
    for n in range(1, len(emitted) + 1):  # released text is never taken back
        assert expected_text.startswith("".join(emitted[:n]))


@pytest.mark.parametrize("text, stops", CASES)
def test_every_pair_of_split_positions_gives_the_reference_result(text, stops):
    expected = reference(text, stops, False)
    for a, b in itertools.combinations(range(len(text) + 1), 2):
        out, stop, _ = run([text[:a], text[a:b], text[b:]], stops, False)
        assert (out, stop) == expected, (a, b)


def test_random_streams_against_the_reference():
    rng = random.Random(11)
    alphabet = "ab \n🙂é"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25)))
        stops = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 3))]
        pieces, i = [], 0
        while i < len(text):
            n = rng.randint(1, 5)
            pieces.append(text[i : i + n])
            i += n
        include = rng.random() < 0.5
        out, stop, _ = run(pieces, stops, include)
        assert (out, stop) == reference(text, stops, include), (text, stops, pieces)


def test_text_that_cannot_start_a_stop_string_is_released_at_once():
    matcher = StopStringMatcher(["</answer>"])
    assert matcher.feed("plain text").text == "plain text"
    assert matcher.feed(" then </ans").text == " then "
    assert matcher.feed("wer is not it").text == "</answer is not it"
    assert matcher.feed("</answer>").stop == "</answer>"
    assert matcher.finished and matcher.feed("more").text == "" and matcher.flush() == ""


def test_no_stop_strings_passes_everything_through():
    matcher = StopStringMatcher([])
    assert matcher.feed("anything </s>").text == "anything </s>"
    assert matcher.flush() == ""


def test_stop_string_split_inside_utf8_characters_across_tokens():
    """Byte-level tokens split the emoji; the detokenizer and the matcher together still cut cleanly."""
    tok = load_ours(TINY_CHAT_DIR)
    text = "Sure! Here you go 👋🏽 goodbye and then some more text"
    stop = "👋🏽 good"
    ids = tok.encode(text, add_special_tokens=False)
    for include in (False, True):
        detok, matcher = IncrementalDetokenizer(tok), StopStringMatcher([stop], include)
        out, found = [], None
        for token_id in ids:
            result = matcher.feed(detok.add(token_id))
            out.append(result.text)
            if result.stop:
                found = result.stop
                break
        assert found == stop
        assert "".join(out) == reference(text, [stop], include)[0]
