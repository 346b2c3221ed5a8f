"""The engine serves a model converted at load (--quantize): packed nodes through AOT compile and decode."""

from __future__ import annotations

import os
import sys

from engine_harness import MODEL_DIR, small_engine_config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models"))
from paged_runner import PagedRunner  # noqa: E402

from dgjax.config import ModelConfig  # noqa: E402
from dgjax.llm import LLM  # noqa: E402
from dgjax.quant import Fp8BlockWeight, Nvfp4Weight  # noqa: E402
from dgjax.runtime.loading import load_model  # noqa: E402
from dgjax.runtime.types import SamplingParams  # noqa: E402

PROMPT = [12, 400, 77, 1030, 5, 999, 63]
SMALL = dict(decode_buckets=(2,), prefill_buckets=(16,), max_concurrency=2, aot_logprob_variants=False)


def test_engine_generates_greedily_with_weights_converted_to_fp8_at_load():
    with LLM(MODEL_DIR, small_engine_config(quantize="fp8", **SMALL)) as llm:
        loaded = llm.engine._loaded
        assert isinstance(loaded.params.layers[0].attn.q, Fp8BlockWeight)
        assert isinstance(loaded.params.layers[1].mlp.down, Fp8BlockWeight)
        out = llm.generate([PROMPT], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))[0]
        # The same converted weights stepped by the tests' own paged driver give the same greedy tokens.
        runner = PagedRunner(llm.engine.model_config, loaded.params, loaded.mesh)
        assert out.token_ids == runner.greedy("seq", PROMPT, 6)


def test_random_benchmark_weights_are_converted_too():
    cfg = ModelConfig.from_dir(MODEL_DIR)
    loaded = load_model(MODEL_DIR, cfg, small_engine_config(quantize="nvfp4", load_format="dummy", **SMALL), 64)
    gate = loaded.params.layers[0].mlp.gate
    assert isinstance(gate, Nvfp4Weight) and gate.packed.shape == (cfg.intermediate_size, cfg.hidden_size // 2)
