"""MoE models with the MoE decode kernel forced (interpreted on CPU) equal the reference expert path.

Every step here routes at most 16 tokens (16-wide prefill chunks with padding tokens, then batched decode
rows with a padding row), so with DGJAX_MOE_KERNEL=kernel all routed experts run through the kernel.
The GLM case (sigmoid router, routing weights scaled by 2.5, a shared expert, a dense first layer) is the
one run: the kernel sees only (x, ids, weights, experts), which every MoE family hands it alike.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from moe_cases import MoECase, build_case, fresh_trace_logits

from dgjax.models.batch import ForwardBatch
from dgjax.pallas.moe_decode import api


@pytest.fixture(scope="module", params=["glm4_moe_grouped_shared_mtp"])
def moe_case(request, tmp_path_factory) -> MoECase:
    return build_case(request.param, tmp_path_factory.mktemp(request.param))


def _decode_batch(rows: int) -> ForwardBatch:
    z = jnp.zeros((rows, 1), jnp.int32)
    return ForwardBatch(tokens=z, positions=z, query_lens=jnp.ones((rows,), jnp.int32),
                        block_tables=jnp.zeros((rows, 8), jnp.int32), context_lens=jnp.ones((rows,), jnp.int32))


def _run(case: MoECase, impl: str, monkeypatch) -> tuple[list[np.ndarray], str]:
    """Logits with the expert path `impl` (moe_cases.fresh_trace_logits), plus the decode step's jaxpr."""
    monkeypatch.setenv(api.ENV_VAR, impl)
    logits, (step, runner) = fresh_trace_logits(case, monkeypatch)
    jaxpr = str(jax.make_jaxpr(lambda p, kv: step(p, kv, _decode_batch(3), case.cfg))(case.params, runner.kv))
    return logits, jaxpr


def test_forced_kernel_equals_reference_expert_path(moe_case, monkeypatch):
    want, ref_jaxpr = _run(moe_case, "ref", monkeypatch)
    got, kernel_jaxpr = _run(moe_case, "kernel", monkeypatch)
    assert "pallas_call" in kernel_jaxpr and "pallas_call" not in ref_jaxpr
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=2e-5, rtol=0)
