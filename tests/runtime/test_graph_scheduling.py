"""DGJAX_GRAPH_SCHEDULING: parsed strictly, handed to XLA as a compile option of the decode executables only."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from benchmarks.engine_runs import executor_of
from dgjax.llm import LLM
from dgjax.runtime import graph_scheduling
from dgjax.runtime.types import SamplingParams

from engine_harness import MODEL_DIR, small_engine_config


def test_modes_map_to_xla_values_and_bad_values_name_the_variable(monkeypatch):
    monkeypatch.delenv(graph_scheduling.ENV_VAR, raising=False)
    assert graph_scheduling.resolve() == "auto"
    assert graph_scheduling.compile_options("xla") == {}
    monkeypatch.setenv(graph_scheduling.ENV_VAR, " Concurrent ")
    assert graph_scheduling.compile_options() == {graph_scheduling.OPTION: "CONCURRENT"}
    assert graph_scheduling.compile_options("serialize") == {graph_scheduling.OPTION: "SERIALIZE"}
    monkeypatch.setenv(graph_scheduling.ENV_VAR, "parallel")
    with pytest.raises(ValueError, match=graph_scheduling.ENV_VAR):
        graph_scheduling.resolve()


def test_xla_knows_the_option_and_checks_its_value():
    # The option name is a real DebugOptions field (XLA parses GPU options on every backend): a rename in a
    # later XLA fails here instead of silently doing nothing on the GPU.
    lowered = jax.jit(lambda x: x * 2).lower(jnp.ones(3))
    for mode in ("xla", "concurrent", "serialize"):
        assert lowered.compile(compiler_options=graph_scheduling.compile_options(mode) or None)(
            jnp.ones(3)).tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(Exception, match="not a valid enum value"):
        lowered.compile(compiler_options={graph_scheduling.OPTION: "SIDEWAYS"})


def test_auto_follows_the_model_shared_expert(monkeypatch):
    from benchmarks.presets import PRESETS
    from dgjax.config import ModelConfig

    monkeypatch.delenv(graph_scheduling.ENV_VAR, raising=False)
    cfgs = {p: ModelConfig.from_hf_dict(PRESETS[p]) for p in ("glm-4.5-air", "qwen3-30b-a3b", "llama-3.1-8b")}
    picked = {p: graph_scheduling.for_model(c, "auto") for p, c in cfgs.items()}
    assert picked == {"glm-4.5-air": "concurrent", "qwen3-30b-a3b": "xla", "llama-3.1-8b": "xla"}
    # the default is "auto": measured on the H200 (s15a) to gain on glm with the same greedy tokens
    assert graph_scheduling.DEFAULT == "auto"
    assert {p: graph_scheduling.for_model(c) for p, c in cfgs.items()} == picked
    assert graph_scheduling.for_model(cfgs["llama-3.1-8b"], "serialize") == "serialize"
    with pytest.raises(ValueError, match="for_model"):
        graph_scheduling.compile_options("auto")


def _greedy_ids(monkeypatch, mode: str | None):
    if mode is None:
        monkeypatch.delenv(graph_scheduling.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(graph_scheduling.ENV_VAR, mode)
    cfg = small_engine_config(decode_buckets=(1, 2), prefill_buckets=(16,), aot_logprob_variants=False)
    with LLM(MODEL_DIR, cfg) as llm:
        executor = executor_of(llm.engine)
        outs = llm.generate(["The with statement", "import"],
                            SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))
        return executor.graph_scheduling, executor.decode_options, [o.token_ids for o in outs]


def test_engine_compiles_decode_with_the_mode_and_decodes_the_same_tokens(monkeypatch):
    mode, options, concurrent = _greedy_ids(monkeypatch, "concurrent")
    assert (mode, options) == ("concurrent", {graph_scheduling.OPTION: "CONCURRENT"})
    mode, options, default = _greedy_ids(monkeypatch, None)
    assert (mode, options) == ("xla", {})  # "auto" on a model without a shared expert
    assert concurrent == default and all(len(ids) == 6 for ids in default)


def test_engine_refuses_an_unknown_mode_at_start(monkeypatch):
    monkeypatch.setenv(graph_scheduling.ENV_VAR, "fast")
    with pytest.raises(ValueError, match=graph_scheduling.ENV_VAR):
        LLM(MODEL_DIR, small_engine_config(decode_buckets=(1,), prefill_buckets=(16,)))
