"""DGJAX_STABLE_BUFFERS: a decode tick's results, layout and split-tick logits stay in the same buffers from tick
to tick (what keeps XLA from re-recording its CUDA graph), and no generated token or logprob changes."""

from __future__ import annotations

import jax
import pytest

from benchmarks.engine_runs import executor_of
from dgjax.llm import LLM
from dgjax.runtime import stable_buffers
from dgjax.runtime.types import MAX_TOP_LOGPROBS, SamplingParams

from engine_harness import MODEL_DIR, small_engine_config

PROMPTS = ["The with statement", "import", "def main():"]
GRAMMAR = 'start: /[a-z ]+/ "."'


def _pointers(tree) -> tuple:
    return tuple(a.unsafe_buffer_pointer() for a in jax.tree.leaves(tree) if a.size)


def _run(monkeypatch, mode: str):
    """Greedy ids and top-3 logprobs (unconstrained and under a grammar), and after every decode call the
    device addresses of the executor's per-bucket buffers with the layout it held."""
    monkeypatch.setenv(stable_buffers.ENV_VAR, mode)
    cfg = small_engine_config(decode_buckets=(1, 4), prefill_buckets=(16,), aot_structured_variants=True)
    with LLM(MODEL_DIR, cfg) as llm:
        executor = executor_of(llm.engine)
        seen = []

        def recording(method):
            def call(*args, **kwargs):
                out = method(*args, **kwargs)
                seen.append({
                    **{("result", k): _pointers(v) for k, v in executor._mailboxes.items()},
                    # the mailboxes donate only arrays with elements ([B, 0] top-logprobs stay fresh outputs)
                    **{("empty", k): sum(not a.size for a in jax.tree.leaves(v))
                       for k, v in executor._mailboxes.items()},
                    **{("logits", k): _pointers(v) for k, v in executor._logit_boxes.items()},
                    **{("layout", k): _pointers(v[1]) for k, v in executor._layouts.items()},
                    **{("tables", k): v[0][2].tobytes() for k, v in executor._layouts.items()},
                })
                return out
            return call

        executor.decode = recording(executor.decode)
        executor.decode_forward = recording(executor.decode_forward)
        plain = llm.generate(PROMPTS, SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True, logprobs=3))
        constrained = llm.generate(PROMPTS[:2], SamplingParams(max_tokens=12, temperature=0.0, grammar=GRAMMAR))
        bare = llm.generate(PROMPTS[:1], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))  # no top
        ids = [o.token_ids for o in plain + constrained + bare]
        logprobs = [[(t.token_id, t.logprob, list(t.top)) for t in o.logprobs] for o in plain]
        return executor.stable, ids, logprobs, seen


def test_buffers_keep_their_addresses_and_results_do_not_change(monkeypatch):
    on, ids_on, lp_on, seen = _run(monkeypatch, "on")
    assert on and len(seen) >= 20
    first: dict = {}
    tables: dict = {}
    for tick in seen:
        for key, value in tick.items():
            if key[0] == "tables":
                tables.setdefault(key[1], set()).add(value)
            elif key[0] == "empty":
                assert value == 0, f"mailbox {key[1]} holds {value} empty arrays"
            else:
                assert first.setdefault(key, value) == value, f"{key} moved"
    kinds = {key[0] for key in first}
    assert kinds == {"result", "logits", "layout"}, kinds  # every kind of buffer was used
    # ticks without top-logprobs and with them (the sampler computes MAX_TOP_LOGPROBS whenever asked)
    assert {key[1][1] for key in first if key[0] == "result"} == {0, MAX_TOP_LOGPROBS}
    # the block tables changed while their buffers stayed put: rows crossed pages (8 tokens each)
    assert max(len(v) for v in tables.values()) >= 3
    off, ids_off, lp_off, fresh = _run(monkeypatch, "off")
    assert not off and fresh and not any(k[0] in ("result", "logits") for tick in fresh for k in tick)
    assert ids_on == ids_off and all(len(ids) == 20 for ids in ids_on[:3])
    assert lp_on == lp_off
    assert all(ids and len(ids) <= 12 for ids in ids_on[3:5])  # the grammar rows decoded through the split tick
    assert len(ids_on[5]) == 6


def test_unknown_mode_names_the_variable(monkeypatch):
    monkeypatch.setenv(stable_buffers.ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match=stable_buffers.ENV_VAR):
        stable_buffers.enabled()
