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
        assert loaded.executor.pdl_mode == "off"  # quantized weights: no early PDL triggers (pallas/pdl.py)
        out = llm.generate([PROMPT], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))[0]
        # The same converted weights stepped by the tests' own paged driver give the same greedy tokens.
        runner = PagedRunner(llm.engine.model_config, loaded.params, loaded.mesh)
        assert out.token_ids == runner.greedy("seq", PROMPT, 6)


def test_random_benchmark_weights_are_converted_too():
    cfg = ModelConfig.from_dir(MODEL_DIR)
    loaded = load_model(MODEL_DIR, cfg, small_engine_config(quantize="nvfp4", load_format="dummy", **SMALL), 64)
    gate = loaded.params.layers[0].mlp.gate
    assert isinstance(gate, Nvfp4Weight) and gate.packed.shape == (cfg.intermediate_size, cfg.hidden_size // 2)


def test_random_weights_are_converted_leaf_by_leaf_to_the_same_result(monkeypatch):
    """Dummy loading converts each leaf as it is made (a model that only fits quantized never holds its
    bf16 weights at once); the result equals initialising everything first and converting after."""
    import jax
    import numpy as np

    from dgjax.checkpoint.convert import convert_params, parse_quantize
    from dgjax.checkpoint.hf_names import hf_sources
    from dgjax.models.registry import get_family
    from dgjax.models.params import init_params
    from dgjax.models.params import resolve_dtype
    from dgjax.runtime.loading import sharding_rules
    from dgjax.sharding import make_mesh

    cfg = ModelConfig.from_dir(MODEL_DIR)
    ecfg = small_engine_config(quantize="fp8", load_format="dummy", **SMALL)
    monkeypatch.setenv("DGJAX_FUSE_PROJECTIONS", "0")  # compare the converted leaves as initialised
    loaded = load_model(MODEL_DIR, cfg, ecfg, 64)
    dtype = resolve_dtype(cfg.torch_dtype, ecfg.dtype)
    specs = get_family(cfg).param_specs(cfg, dtype)
    mesh, rules = make_mesh(1), sharding_rules(ecfg, cfg)
    whole = convert_params(init_params(specs, jax.random.key(ecfg.seed), mesh, rules), hf_sources(cfg), specs,
                           parse_quantize("fp8"), mesh, rules)
    got, want = jax.tree_util.tree_leaves(loaded.params), jax.tree_util.tree_leaves(whole)
    assert len(got) == len(want) and any(x.dtype == jax.numpy.float8_e4m3fn for x in got)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


def test_engine_with_bf12_weights_generates_what_the_bf16_engine_generates(caplog):
    """--quantize bf12 on a bf16 engine: projections and lm_head are packed (the load log says so), and greedy
    decoding gives the bf16 engine's tokens (on the CPU the reference path: the same bf16 values, same dots)."""
    from dgjax.quant import Bf12Weight

    config = dict(SMALL, dtype="bfloat16")
    with LLM(MODEL_DIR, small_engine_config(**config)) as llm:
        want = llm.generate([PROMPT], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))[0].token_ids
    with caplog.at_level("INFO", logger="dgjax.engine"):
        with LLM(MODEL_DIR, small_engine_config(quantize="bf12", **config)) as llm:
            loaded = llm.engine._loaded
            assert isinstance(loaded.params.layers[1].mlp.down, Bf12Weight)
            assert isinstance(loaded.params.lm_head, Bf12Weight) or loaded.params.lm_head is None
            out = llm.generate([PROMPT], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))[0]
    assert out.token_ids == want
    assert "weights bf12" in caplog.text
