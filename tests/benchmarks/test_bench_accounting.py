"""The harness's bookkeeping: the steady decode window read from callback timestamps, the engine plan
(contexts and pages that fit every case), and the byte counts behind the roofline."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import roofline
from benchmarks.engine_runs import decode_max_tokens, plan_engines
from benchmarks.presets import PRESETS
from benchmarks.traces import StreamTrace, steady_window
from dgjax.config import ModelConfig


def synthetic_traces(starts: list[int], num_tokens: int, period: float, jitter: float) -> list[StreamTrace]:
    """Stream i's m-th token arrives at tick starts[i] + m - 1; streams are stamped in order within a tick."""
    traces = []
    for i, s in enumerate(starts):
        t = StreamTrace()
        t.times = [(s + m) * period + i * jitter for m in range(num_tokens)]
        t.counts = list(range(1, num_tokens + 1))
        traces.append(t)
    return traces


def test_steady_window_counts_only_ticks_where_every_stream_decodes():
    period, n, prompt = 0.01, 50, 100
    starts = [0, 3, 7, 12]
    w = steady_window(synthetic_traces(starts, n, period, jitter=1e-5), prompt)
    overlap_ticks = (starts[0] + n - 1) - starts[-1]
    assert w.ms_per_step == pytest.approx(1e3 * period, rel=1e-3)
    assert w.aggregate_tok_s == pytest.approx(len(starts) / period, rel=0.02)
    assert w.seconds == pytest.approx(overlap_ticks * period, rel=1e-3)
    # Contexts: stream i's token at tick k is its (k - starts[i] + 1)-th, made by a step over
    # prompt + (k - starts[i]) keys; average over ticks inside the window.
    ctx = [prompt + k - s for s in starts for k in range(starts[-1] + 1, starts[0] + n)]
    assert w.mean_context == pytest.approx(np.mean(ctx), rel=0.01)


def test_steady_window_rejects_streams_that_never_overlap():
    with pytest.raises(ValueError, match="no steady decode window"):
        steady_window(synthetic_traces([0, 30], 10, 0.01, 0.0), 8)


@pytest.mark.parametrize("split", [False, True])
def test_engine_plan_fits_every_case(split):
    contexts, conc, prefills = [1024, 8192], [1, 4, 16], [2048, 8192, 32768]
    page, chunk, decode_tokens, replay = 16, 2048, 128, 42
    plans = plan_engines(contexts, conc, prefills, decode_tokens=decode_tokens, chunk=chunk,
                         page_size=page, replay_steps=replay, split=split)
    assert sorted(c for p in plans for c in p.decode_cases) == sorted((c, n) for c in contexts for n in conc)
    assert sorted(x for p in plans for x in p.prefill_cases) == prefills
    for p in plans:
        assert p.max_model_len % page == 0
        assert p.num_pages >= math.ceil(p.max_model_len / page) + 1
        for c, n in p.decode_cases:
            total = c + decode_max_tokens(c, n, decode_tokens, chunk)
            assert total + replay <= p.max_model_len
            assert p.num_pages >= n * math.ceil(total / page) + 1
            assert n in p.decode_buckets and p.max_concurrency >= n
        for x in p.prefill_cases:
            assert x + 1 <= p.max_model_len and p.num_pages >= math.ceil((x + 1) / page) + 1
    if split:
        assert len(plans) == 2 and plans[1].prefill_cases == [32768] and plans[1].decode_buckets == (1,)
        assert plans[0].max_model_len < 32768  # decode block tables span only the decode contexts
    else:
        assert len(plans) == 1


@pytest.mark.parametrize("preset", ["llama-3.1-8b", "qwen3-8b"])
def test_decode_bytes_match_a_hand_count_of_the_public_shapes(preset):
    hf = PRESETS[preset]
    cfg = ModelConfig.from_hf_dict(hf)
    e, f, v, L = hf["hidden_size"], hf["intermediate_size"], hf["vocab_size"], hf["num_hidden_layers"]
    q, kv = hf["num_attention_heads"] * hf["head_dim"], hf["num_key_value_heads"] * hf["head_dim"]
    norms = 2 * e + (2 * hf["head_dim"] if hf["model_type"] == "qwen3" else 0)
    per_layer = e * q + 2 * e * kv + q * e + 3 * e * f + norms
    params = L * per_layer + e + 2 * v * e  # final norm, untied embedding and lm_head
    assert roofline.param_bytes(cfg, jnp.bfloat16) == 2 * params
    rows = 4
    assert roofline.decode_weight_bytes(cfg, jnp.bfloat16, rows) == 2 * (params - v * e + rows * e)
    assert roofline.kv_bytes_per_token(cfg, jnp.bfloat16) == 2 * 2 * L * kv
