"""MoE models with the MoE prefill kernel forced (interpreted on CPU) prefill like the reference expert path.

16-wide prefill chunks (with padding tokens) route 32 assignments to 8 experts: the ragged path, whose
grouped MLP DGJAX_MOE_PREFILL=kernel sends through the grouped-GEMM kernel. The Qwen3-MoE case (softmax
router, renormalized top-k, a dense first layer) is the one run; the GLM case runs the decode kernel's test.
"""

from __future__ import annotations

import jax
import numpy as np
import paged_runner
import pytest
from moe_cases import PROMPT, MoECase, build_case
from paged_runner import PagedRunner

from dgjax.pallas.moe_prefill import api


@pytest.fixture(scope="module", params=["qwen3_moe_dense_layer0_renorm"])
def moe_case(request, tmp_path_factory) -> MoECase:
    return build_case(request.param, tmp_path_factory.mktemp(request.param))


_FORWARD = paged_runner.step_logits.__wrapped__


def _prefill(case: MoECase, impl: str, monkeypatch) -> tuple[list[np.ndarray], str]:
    """Logits of the HF tokens in two 16-wide chunks and of a 2-row chunk batch (one padding row), with the
    prefill expert path `impl`; plus the jaxpr of the first chunk step."""
    monkeypatch.setenv(api.ENV_VAR, impl)
    # The implementation is chosen at trace time and jit caches traces per Python function: trace a new one.
    step = jax.jit(lambda params, kv, batch, cfg: _FORWARD(params, kv, batch, cfg), static_argnames=("cfg",))
    jaxprs = []

    def recording_step(params, kv, batch, cfg):
        if not jaxprs:
            jaxprs.append(str(jax.make_jaxpr(lambda p, c, b: step(p, c, b, cfg))(params, kv, batch)))
        return step(params, kv, batch, cfg)

    monkeypatch.setattr(paged_runner, "step_logits", recording_step)
    runner = PagedRunner(case.cfg, case.params, case.mesh, seed=1)
    tokens = case.hf_tokens
    logits = [runner.step([("a", tokens[:9])], 16)[0], runner.step([("a", tokens[9:])], 16)[0]]
    logits += [o for o in runner.step([None, ("b", PROMPT[::-1])], 16) if o is not None]
    return logits, jaxprs[0]


def test_forced_prefill_kernel_equals_reference_and_transformers(moe_case, monkeypatch):
    want, ref_jaxpr = _prefill(moe_case, "ref", monkeypatch)
    got, kernel_jaxpr = _prefill(moe_case, "kernel", monkeypatch)
    assert "pallas_call" in kernel_jaxpr and "pallas_call" not in ref_jaxpr
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=2e-5, rtol=0)
    logprobs = np.asarray(jax.nn.log_softmax(np.concatenate(got[:2]), axis=-1))
    np.testing.assert_allclose(logprobs, moe_case.hf_logprobs, atol=1e-4, rtol=0)
