"""Expert selection: the one-kernel version for decode steps where it applies, ref.py otherwise.

Dispatch (decided at trace time):
- impl "ref": ref.py everywhere.
- impl "auto" (default): the kernel on a GPU for 1-16 tokens where `kernel.supports` accepts the rule, once
  GPU_VALIDATED; ref.py otherwise (CPU, prefill chunks, group-limited routing). The kernel has passed its
  interpret-mode and Triton-lowering tests but has not yet run on the H200 (benchmarks/moe_routing_check.py):
  until then auto keeps ref.py and `kernel` opts in.
- impl "kernel": the kernel wherever it supports the case (the Pallas interpreter off GPU), ref.py elsewhere.
`impl=None` reads DGJAX_MOE_ROUTING (auto | ref | kernel, default auto).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dgjax.pallas.launch import choose_impl
from dgjax.pallas.moe_routing import kernel, ref
from dgjax.pallas.moe_routing.ref import RoutingRule

IMPLS = ("auto", "ref", "kernel")
ENV_VAR = "DGJAX_MOE_ROUTING"
GPU_VALIDATED = False  # flip once benchmarks/moe_routing_check.py has checked it on the H200


def resolve_impl(impl: str | None = None) -> str:
    return choose_impl(impl, ENV_VAR, IMPLS, "moe routing")


def use_kernel(tokens: int, num_experts: int, rule: RoutingRule, impl: str | None = None) -> bool:
    chosen = resolve_impl(impl)
    if chosen == "ref" or not kernel.supports(tokens, num_experts, rule):
        return False
    return chosen == "kernel" or (GPU_VALIDATED and jax.default_backend() == "gpu")


def select_experts(logits: jax.Array, rule: RoutingRule, score_bias: jax.Array | None = None,
                   valid: jax.Array | None = None, impl: str | None = None) -> tuple[jax.Array, jax.Array]:
    """(ids int32 [N, top_k], weights float32 [N, top_k]) from router logits [N, experts] (ref.py's contract)."""
    n, e = logits.shape
    if not use_kernel(n, e, rule, impl):
        return ref.select_experts(logits, rule, score_bias, valid)
    bias = jnp.zeros((e,), jnp.float32) if score_bias is None else score_bias
    valid = jnp.ones((n,), jnp.bool_) if valid is None else valid
    return kernel.select_experts(logits, valid, bias, rule=rule, interpret=jax.default_backend() != "gpu")
