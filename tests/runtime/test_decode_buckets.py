"""Which decode widths an engine compiles (EngineConfig.used_decode_buckets)."""

from __future__ import annotations

import pytest

from dgjax.config import MIN_DECODE_WIDTH, MIN_DECODE_WIDTH_ENV, EngineConfig


@pytest.mark.parametrize("slots,buckets,want", [
    (1, (1,), (2,)),  # a single slot still decodes at width 2 (its padding row uses the pad slot)
    (1, (1, 2, 4), (2,)),
    (2, (1, 2, 4), (2,)),
    (4, (1, 2, 4, 8), (2, 4)),
    (6, (1, 4), (2, 4, 6)),  # the last width holds every slot
    (16, (1, 2, 4, 8, 16), (2, 4, 8, 16)),
])
def test_widths_start_at_the_minimum_and_stop_at_the_first_that_holds_every_slot(slots, buckets, want):
    assert MIN_DECODE_WIDTH == 2
    assert EngineConfig(max_concurrency=slots, decode_buckets=buckets).used_decode_buckets() == want


@pytest.mark.parametrize("raw,slots,want", [("1", 1, (1,)), ("1", 4, (1, 2, 4)), ("4", 2, (4,)), ("", 1, (2,))])
def test_the_minimum_width_can_be_set_for_probes(monkeypatch, raw, slots, want):
    monkeypatch.setenv(MIN_DECODE_WIDTH_ENV, raw)
    assert EngineConfig(max_concurrency=slots, decode_buckets=(1, 2, 4, 8)).used_decode_buckets() == want


@pytest.mark.parametrize("raw", ["0", "-1", "two"])
def test_a_bad_minimum_width_is_named(monkeypatch, raw):
    monkeypatch.setenv(MIN_DECODE_WIDTH_ENV, raw)
    with pytest.raises(ValueError, match=MIN_DECODE_WIDTH_ENV):
        EngineConfig(max_concurrency=1).used_decode_buckets()


def test_a_width_one_engine_decodes_what_the_width_two_engine_does(monkeypatch):
    """With no padding row (one slot, width 1) greedy decoding gives the width-2 engine's tokens."""
    from dgjax.llm import LLM
    from dgjax.runtime.types import SamplingParams
    from engine_harness import MODEL_DIR, small_engine_config

    params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    got = {}
    for raw in ("1", ""):
        monkeypatch.setenv(MIN_DECODE_WIDTH_ENV, raw)
        m = LLM(MODEL_DIR, small_engine_config(max_concurrency=1, decode_buckets=(1,)))
        try:
            got[raw] = (m.engine._loaded.executor.decode_buckets, m.generate([[5, 17, 42, 7]], params)[0].token_ids)
        finally:
            m.close()
    assert got["1"][0] == (1,) and got[""][0] == (2,)
    assert got["1"][1] == got[""][1] and len(got["1"][1]) == 8
