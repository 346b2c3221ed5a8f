"""Which decode widths an engine compiles (EngineConfig.used_decode_buckets)."""

from __future__ import annotations

import pytest

from dgjax.config import MIN_DECODE_WIDTH, EngineConfig


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
