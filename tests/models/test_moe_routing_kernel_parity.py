"""A Qwen3-MoE model with the expert-selection kernel forced (interpreted on CPU) equals the jnp routing.

Decode steps of up to 16 rows route through dgjax.pallas.moe_routing's kernel (with a padding row in the
batch); 16-wide prefill chunks too. Logits must agree to float32 rounding and greedy tokens exactly.
"""

from __future__ import annotations

import jax
import numpy as np
import paged_runner
import pytest
from moe_cases import NEW_TOKENS, PROMPT, MoECase, build_case
from paged_runner import PagedRunner

from dgjax.pallas.moe_routing import api, kernel


@pytest.fixture(scope="module")
def moe_case(tmp_path_factory) -> MoECase:
    return build_case("qwen3_moe_dense_layer0_renorm", tmp_path_factory.mktemp("qwen3-moe"))


def _run(case: MoECase, impl: str, monkeypatch) -> list[np.ndarray]:
    monkeypatch.setenv(api.ENV_VAR, impl)
    forward = paged_runner.step_logits.__wrapped__  # a fresh trace: the routing is chosen at trace time
    step = jax.jit(lambda params, kv, batch, cfg: forward(params, kv, batch, cfg), static_argnames=("cfg",))
    monkeypatch.setattr(paged_runner, "step_logits", step)
    runner = PagedRunner(case.cfg, case.params, case.mesh, seed=1)
    logits = [runner.step([("a", PROMPT)], 16)[0], runner.step([("b", [9, 40, 2, 77])], 16)[0]]
    last = {"a": logits[0][-1], "b": logits[1][-1]}
    for _ in range(NEW_TOKENS // 2):
        out = runner.step([("a", [int(np.argmax(last["a"]))]), None, ("b", [int(np.argmax(last["b"]))])], 1)
        logits += [out[0], out[2]]
        last = {"a": out[0][-1], "b": out[2][-1]}
    return logits


def test_forced_routing_kernel_equals_jnp_routing(moe_case, monkeypatch):
    traced = []  # (tokens, experts) of every kernel call traced: the kernel is really on the path
    real = kernel.select_experts
    monkeypatch.setattr(kernel, "select_experts", lambda logits, *a, **k: traced.append(logits.shape) or real(
        logits, *a, **k))
    want = _run(moe_case, "ref", monkeypatch)
    assert traced == []
    got = _run(moe_case, "kernel", monkeypatch)
    assert {t for t, _ in traced} == {16, 3}  # prefill chunks and the 3-row decode batch
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=2e-5, rtol=0)
        assert (np.argmax(g, -1) == np.argmax(w, -1)).all()
