"""TextStream: detokenizer and stop strings together, as the engine uses them per request."""

from __future__ import annotations

import random

from text_fixtures import TINY_CHAT_DIR, load_ours, stop_reference

from dgjax.text.stream import TextStream

TEXT = "Answer: 42 🙂.\n\nNext 你好 line</s> tail 👋🏽 end"


def test_streamed_output_equals_the_stop_cut_of_the_full_decode():
    tok = load_ours(TINY_CHAT_DIR)
    rng = random.Random(3)
    ids = tok.encode(TEXT, add_special_tokens=False)
    full = tok.decode(ids)
    for stops in ([], ["</s>"], ["🙂."], ["你好 l", "xyz"], ["end"], ["\n\n"], ["not there"], ["👋🏽"]):
        for include in (False, True):
            stream, deltas, stopped = TextStream(tok, stop=stops, include_stop_str_in_output=include), [], None
            i = 0
            while i < len(ids) and stopped is None:
                n = rng.randint(1, 3)
                result = stream.add(ids[i : i + n])
                deltas.append(result.text)
                stopped = result.stop
                i += n
            final = stream.finish()
            deltas.append(final.text)
            stopped = stopped or final.stop
            assert ("".join(deltas), stopped) == stop_reference(full, stops, include), stops
            assert stream.text == "".join(deltas) and stream.stopped == stopped


def test_nothing_is_released_after_a_stop_or_after_finish():
    tok = load_ours(TINY_CHAT_DIR)
    stream = TextStream(tok, stop=["STOP"])
    assert stream.add(tok.encode("go STOP", add_special_tokens=False)).stop == "STOP"
    assert stream.add(tok.encode("more", add_special_tokens=False)).text == ""
    assert stream.finish().text == "" and stream.text == "go "
    ended = TextStream(tok, stop=["zz"])
    ended.add(tok.encode("a z", add_special_tokens=False))
    assert ended.finish().text == "z" and ended.text == "a z"
    assert ended.add(tok.encode("z", add_special_tokens=False)).text == ""


def test_special_tokens_are_kept_or_skipped_as_asked():
    tok = load_ours(TINY_CHAT_DIR)
    ids = tok.encode("<|im_start|>hi<|im_end|>", add_special_tokens=False)
    for skip in (True, False):
        stream = TextStream(tok, skip_special_tokens=skip)
        text = "".join(stream.add(i).text for i in ids) + stream.finish().text
        assert text == tok.decode(ids, skip_special_tokens=skip)
