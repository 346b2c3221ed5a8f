"""The engine serves a model converted at load (--quantize): packed nodes through AOT compile and decode."""

from __future__ import annotations

import os
import sys

import numpy as np
from engine_harness import MODEL_DIR, small_engine_config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models"))
from paged_runner import PagedRunner  # noqa: E402

from dgjax.llm import LLM  # noqa: E402
from dgjax.quant import Fp8BlockWeight, Nvfp4Weight  # noqa: E402
from dgjax.runtime.types import SamplingParams  # noqa: E402

PROMPT = [12, 400, 77, 1030, 5, 999, 63]


def test_engine_generates_with_weights_converted_at_load_and_from_dummy_weights():
    config = small_engine_config(quantize="fp8", decode_buckets=(2,), prefill_buckets=(16,), max_concurrency=2,
                                 aot_logprob_variants=False)
    with LLM(MODEL_DIR, config) as llm:
        loaded = llm.engine._loaded
        attn = loaded.params.layers[0].attn
        assert isinstance(attn.q, Fp8BlockWeight) and isinstance(loaded.params.layers[1].mlp.down, Fp8BlockWeight)
        out = llm.generate([PROMPT], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))[0]
        # The same converted weights stepped by the test's own paged driver give the same greedy tokens.
        runner = PagedRunner(llm.engine.model_config, loaded.params, loaded.mesh)
        assert out.token_ids == runner.greedy("seq", PROMPT, 6)
    nv = LLM(MODEL_DIR, small_engine_config(quantize="nvfp4", load_format="dummy", decode_buckets=(2,),
                                            prefill_buckets=(16,), max_concurrency=2, aot_logprob_variants=False))
    with nv:
        assert isinstance(nv.engine._loaded.params.layers[0].mlp.gate, Nvfp4Weight)
        out = nv.generate([PROMPT], SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True))[0]
        assert len(out.token_ids) == 3 and np.all(np.asarray(out.token_ids) < nv.engine.model_config.vocab_size)
