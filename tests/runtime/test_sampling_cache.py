"""The decode tick's device copy of the sampling tensors is reused only for the very same sequences.

It was keyed by the sequences' id()s alone; once a finished sequence was freed, a new one could be allocated
at the same address and get the old one's temperature and seed (seen as rare serving-test failures: a seeded
or greedy request sampling like an earlier one).
"""

from __future__ import annotations

import numpy as np
import pytest

from dgjax.llm import LLM
from dgjax.runtime.scheduler import Sequence
from dgjax.runtime.types import GenerationRequest, SamplingParams
from engine_harness import MODEL_DIR, small_engine_config


@pytest.fixture(scope="module")
def engine():
    llm = LLM(MODEL_DIR, small_engine_config(decode_buckets=(1,), prefill_buckets=(16,), aot_logprob_variants=False))
    yield llm.engine
    llm.close()


def test_new_sequences_never_get_an_earlier_sequences_sampling_tensors(engine):
    rng = np.random.default_rng(0)
    for i in range(200):  # CPython hands a freed object's address to the next one of its size
        temperature, seed = float(rng.uniform(0.1, 2.0)), int(rng.integers(1 << 30))
        req = GenerationRequest(f"r{i}", [1, 2, 3], SamplingParams(temperature=temperature, seed=seed))
        seq = Sequence(req=req, on_output=lambda _: None, max_new=4, seed=seed, output=None)
        st = engine._sampling([seq], 1)
        assert float(np.asarray(st.temperature)[0]) == pytest.approx(temperature), i
        del seq, req, st
    same = Sequence(req=GenerationRequest("x", [1], SamplingParams(temperature=0.5)), on_output=lambda _: None,
                    max_new=4, seed=1, output=None)
    assert engine._sampling([same], 1) is engine._sampling([same], 1)  # the same rows still reuse the copy
