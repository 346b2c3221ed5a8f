"""Qwen3-MoE and GLM-4.5-Air-style models with the expert-selection kernel forced (interpreted on CPU) equal the
jnp routing (softmax top-k; sigmoid scores with the correction bias and the routed scaling factor).

Decode steps of up to 16 rows route through dgjax.pallas.moe_routing's kernel (with a padding row in the
batch); 16-wide prefill chunks too. Logits must agree to float32 rounding and greedy tokens exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from moe_cases import MoECase, build_case, fresh_trace_logits

from dgjax.pallas.moe_routing import api, kernel


@pytest.fixture(scope="module", params=["qwen3_moe_dense_layer0_renorm", "glm4_moe_air_routing"])
def moe_case(request, tmp_path_factory) -> MoECase:
    return build_case(request.param, tmp_path_factory.mktemp(request.param))


def _run(case: MoECase, impl: str, monkeypatch) -> list[np.ndarray]:
    monkeypatch.setenv(api.ENV_VAR, impl)
    return fresh_trace_logits(case, monkeypatch)[0]


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


def test_selection_inside_the_decode_kernel_equals_jnp_routing(moe_case, monkeypatch):
    """DGJAX_MOE_ROUTING=fused with the MoE decode kernel forced: every step of <= 16 rows (the prefill chunks
    and the 3-row decode batch with its padding row) selects inside the gate/up stage; the logits match the jnp
    routing with the reference experts."""
    from dgjax.pallas.moe_decode import api as decode_api
    from dgjax.pallas.moe_decode import routed

    traced = []
    real = routed.moe_decode_routed
    monkeypatch.setattr(routed, "moe_decode_routed", lambda x, logits, *a, **k: traced.append(logits.shape) or real(
        x, logits, *a, **k))
    monkeypatch.setenv(decode_api.ENV_VAR, "ref")
    want = _run(moe_case, "ref", monkeypatch)
    monkeypatch.setenv(decode_api.ENV_VAR, "kernel")
    got = _run(moe_case, "fused", monkeypatch)
    assert {t for t, _ in traced} == {16, 3}
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=2e-5, rtol=0)
        assert (np.argmax(g, -1) == np.argmax(w, -1)).all()
