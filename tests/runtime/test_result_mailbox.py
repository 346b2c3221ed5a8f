"""DGJAX_RESULT_MAILBOX: decode results land in the same donated buffers every tick, and nothing else changes."""

from __future__ import annotations

import jax
import pytest

from benchmarks.engine_runs import executor_of
from dgjax.llm import LLM
from dgjax.runtime import result_mailbox
from dgjax.runtime.types import SamplingParams

from engine_harness import MODEL_DIR, small_engine_config

PROMPTS = ["The with statement", "import", "def main():"]


def _run(monkeypatch, mode: str):
    """Greedy ids and top-3 logprobs of three streams, and the mailbox buffers' addresses after every tick."""
    monkeypatch.setenv(result_mailbox.ENV_VAR, mode)
    cfg = small_engine_config(decode_buckets=(1, 4), prefill_buckets=(16,))
    with LLM(MODEL_DIR, cfg) as llm:
        executor = executor_of(llm.engine)
        addresses = []
        decode = executor.decode

        def recording_decode(*args, **kwargs):
            res = decode(*args, **kwargs)
            addresses.append({key: tuple(a.unsafe_buffer_pointer() for a in jax.tree.leaves(box) if a.size)
                              for key, box in executor._mailboxes.items()})
            return res

        executor.decode = recording_decode
        outs = llm.generate(PROMPTS, SamplingParams(max_tokens=7, temperature=0.0, ignore_eos=True, logprobs=3))
        ids = [o.token_ids for o in outs]
        logprobs = [[(t.token_id, t.logprob, list(t.top)) for t in o.logprobs] for o in outs]
        return executor.mailbox, ids, logprobs, addresses


def test_mailbox_keeps_result_addresses_and_changes_no_result(monkeypatch):
    on, ids_on, lp_on, addresses = _run(monkeypatch, "on")
    assert on and len(addresses) >= 6
    # every tick after a bucket's first wrote into the buffers its first tick left: the graph sees one address
    seen: dict = {}
    for tick in addresses:
        for key, pointers in tick.items():
            assert seen.setdefault(key, pointers) == pointers, f"mailbox {key} moved"
    assert seen, "no decode tick used a mailbox"
    off, ids_off, lp_off, fresh = _run(monkeypatch, "off")
    assert not off and fresh and all(tick == {} for tick in fresh)
    assert ids_on == ids_off and all(len(ids) == 7 for ids in ids_on)
    assert lp_on == lp_off


def test_unknown_mode_names_the_variable(monkeypatch):
    monkeypatch.setenv(result_mailbox.ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match=result_mailbox.ENV_VAR):
        result_mailbox.enabled()
