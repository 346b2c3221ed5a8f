"""Expert selection: the one-kernel version for decode steps where it applies, ref.py otherwise.

Dispatch (decided at trace time):
- impl "ref": ref.py everywhere.
- impl "auto" (default): the kernel on the GPU for sigmoid scoring (GLM-4.5: after the router dot XLA runs
  five launches there, softmax three), ref.py otherwise. glm-4.5-air fp8 C1 on the H200, three interleaved
  pairs in session 11 (s11c, s11i): device 6.11 / 6.06 / 6.06 ms a tick with the kernel against 6.23 / 6.16 /
  6.14 without, 164.2 / 166.3 / 166.0 tok/s against 162.8 / 164.3 / 164.6.
  For softmax: Session 5's kernel (k serial max rounds over all tokens) picked the same experts as ref.py on
  the H200 (weights within 1.2e-7, benchmarks/moe_routing_check.py) but the engine ran
  slower with it (qwen3-30b-a3b C1 device 3.56 vs 3.34 ms per tick). The kernel now ranks like ref.py, one
  program per token (kernel.py), in place of XLA's three routing fusions. On the H200 (session 8, s8d) it
  took the same device time as they did (200 vs ~207 µs per tick) but the tick was longer (325.0 vs 355.2
  tok/s), so it stays opt-in there; session 11 (s11i) timed it even again (qwen3-30b-a3b fp8 C1 device 2.81
  ms a tick either way, 348.4 vs 363.8 tok/s).
- impl "kernel": the kernel wherever it supports the case (the Pallas interpreter off GPU), ref.py elsewhere.
- impl "fused": decode steps that run the MoE decode kernel select inside its gate/up stage
  (dgjax/pallas/moe_decode/routed.py: no selection launch at all); everywhere else as "auto". Opt-in: on the
  H200 (s14d) the ranking cost the gate/up stage ~9 µs a layer (qwen3-30b-a3b fp8: 20.2 vs 11.4 µs) against
  ~4 µs of selection launches saved; C1 335.1 vs 360.5 tok/s (qwen3 fp8), 154.9 vs 167.8 (glm-4.5-air fp8).
`impl=None` reads DGJAX_MOE_ROUTING (auto | ref | kernel | fused, default auto).
DGJAX_MOE_ROUTING_WARPS (a power of two, default kernel.DEFAULT_WARPS): the selection kernel's warps a program.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dgjax.env import env_count
from dgjax.pallas.launch import choose_impl
from dgjax.pallas.moe_routing import kernel, ref
from dgjax.pallas.moe_routing.ref import RoutingRule

IMPLS = ("auto", "ref", "kernel", "fused")
ENV_VAR = "DGJAX_MOE_ROUTING"
WARPS_ENV_VAR = "DGJAX_MOE_ROUTING_WARPS"
GPU_PREFERRED_SCORING = ("sigmoid",)  # where the kernel won in the engine on the H200 (see above)


def resolve_impl(impl: str | None = None) -> str:
    return choose_impl(impl, ENV_VAR, IMPLS, "moe routing")


def fused_requested(impl: str | None = None) -> bool:
    """Whether the selection should run inside the MoE decode kernel where that kernel runs ("fused")."""
    return resolve_impl(impl) == "fused"


def use_kernel(tokens: int, num_experts: int, rule: RoutingRule, impl: str | None = None) -> bool:
    chosen = resolve_impl(impl)
    chosen = "auto" if chosen == "fused" else chosen
    if chosen == "ref" or not kernel.supports(tokens, num_experts, rule):
        return False
    return chosen == "kernel" or (rule.scoring in GPU_PREFERRED_SCORING and jax.default_backend() == "gpu")


def select_experts(logits: jax.Array, rule: RoutingRule, score_bias: jax.Array | None = None,
                   valid: jax.Array | None = None, impl: str | None = None) -> tuple[jax.Array, jax.Array]:
    """(ids int32 [N, top_k], weights float32 [N, top_k]) from router logits [N, experts] (ref.py's contract)."""
    n, e = logits.shape
    if not use_kernel(n, e, rule, impl):
        return ref.select_experts(logits, rule, score_bias, valid)
    bias = jnp.zeros((e,), jnp.float32) if score_bias is None else score_bias
    valid = jnp.ones((n,), jnp.bool_) if valid is None else valid
    warps = env_count(WARPS_ENV_VAR, kernel.DEFAULT_WARPS, "moe routing warps", minimum=1, power_of_two=True)
    return kernel.select_experts(logits, valid, bias, rule=rule, num_warps=warps,
                                 interpret=jax.default_backend() != "gpu")
