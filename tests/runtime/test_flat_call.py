"""Decode executables called through FlatCall (parameters flattened once, the runtime executable fed the flat
buffer list) give exactly the ordinary compiled call's results, donate the state the same way, and fall back
to the ordinary call for arguments they were not bound to."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dgjax.llm import LLM
from dgjax.runtime import flat_call
from dgjax.runtime.types import SamplingParams
from engine_harness import MODEL_DIR, small_engine_config


def _step(params, state, x):
    """Reads every parameter but `unused` (pruned from the executable), updates the donated state."""
    acc = sum(v.sum() for k, v in params.items() if k != "unused")
    return {"a": state["a"] + acc * x, "b": state["b"] * 2}, acc


def _compiled():
    params = {f"w{i}": jnp.arange(4.0) + i for i in range(5)} | {"unused": jnp.ones(3)}
    state = {"a": jnp.zeros(4), "b": jnp.ones(2, jnp.int32)}
    exe = jax.jit(_step, donate_argnums=1).lower(params, state, jnp.float32(2)).compile()
    return exe, params


def _state():
    return {"a": jnp.arange(4.0), "b": jnp.ones(2, jnp.int32)}


def test_flat_call_matches_the_compiled_call_and_donates_the_state():
    exe, params = _compiled()
    fast = flat_call.bind(exe, params)
    assert isinstance(fast, flat_call.FlatCall)
    x = jax.device_put(jnp.float32(3))
    want_state, want = exe(params, _state(), x)
    state = _state()
    got_state, got = fast(params, state, x)
    assert fast.fallbacks == 0
    assert float(got) == float(want)
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), got_state, want_state)
    assert state["a"].is_deleted()  # donated like the compiled call's
    again, _ = fast(params, got_state, x)  # a second call through the learned structure
    np.testing.assert_array_equal(np.asarray(again["b"]), [4, 4])


def test_other_arguments_fall_back_to_the_compiled_call():
    exe, params = _compiled()
    fast = flat_call.bind(exe, params)
    x = jax.device_put(jnp.float32(3))
    other = {k: v * 2 for k, v in params.items()}  # not the bound parameters
    want = exe(other, _state(), x)[1]
    assert float(fast(other, _state(), x)[1]) == float(want) and fast.fallbacks == 1
    assert float(fast(params, _state(), np.float32(3))[1]) == float(exe(params, _state(), x)[1])  # host scalar
    assert fast.fallbacks == 2
    with pytest.raises(TypeError):  # a wrong structure still gets the compiled call's error
        fast(params, {"a": jnp.zeros(4)}, x)


def test_switched_off_by_the_environment(monkeypatch):
    exe, params = _compiled()
    monkeypatch.setenv(flat_call.ENV_VAR, "0")
    assert flat_call.bind(exe, params) is exe
    monkeypatch.setenv(flat_call.ENV_VAR, "yes")
    with pytest.raises(ValueError, match=flat_call.ENV_VAR):
        flat_call.bind(exe, params)


def test_engine_decodes_through_flat_calls_with_the_ordinary_results(monkeypatch):
    cfg = small_engine_config(decode_buckets=(2,), prefill_buckets=(16,), aot_logprob_variants=False)
    prompts = [[1, 5, 9, 13], [2, 4, 6]]
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)

    def run():
        llm = LLM(MODEL_DIR, cfg)
        try:
            outs = [o.token_ids for o in llm.generate(prompts, params)]
            return outs, dict(llm.engine._loaded.executor._decode)
        finally:
            llm.close()

    got, exes = run()
    assert exes and all(isinstance(e, flat_call.FlatCall) and e.fallbacks == 0 for e in exes.values())
    monkeypatch.setenv(flat_call.ENV_VAR, "0")
    want, exes = run()
    assert not any(isinstance(e, flat_call.FlatCall) for e in exes.values())
    assert got == want and all(len(t) == 12 for t in got)
