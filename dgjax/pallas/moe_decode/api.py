"""The routed-experts entry point for decode steps (1-16 tokens); picks the Pallas kernel or the reference.

Dispatch (decided at trace time):
- impl "ref": ref.py everywhere.
- impl "auto" (default): the kernel (kernel.py) on a GPU where `kernel.supports` accepts the token count,
  activation and weight formats; ref.py otherwise (CPU, T > 16, formats the kernel does not read yet).
- impl "kernel": the kernel on any platform (through the Pallas interpreter off GPU); with a logged
  warning, the reference where the kernel does not support the case.
`impl=None` reads DGJAX_MOE_KERNEL (auto | ref | kernel, default auto), so one process can trace both paths
by setting the variable before each `jit`. DGJAX_MOE_FUSE (none | all | expert, default none):
- "all": the down stage finishes split gate/up partials itself. It saves the launch between the stages, but on
  the H200 the down kernel's loads of the float32 partials and its activation inside the weight loop cost more
  than that launch: qwen3-30b-a3b fp8 C1, moe_down 800 vs 473 µs per tick, device 3.69 vs 3.43 ms per tick
  (benchmarks/results/2026-12-01-s8a-*).
- "expert": one kernel per layer does gate/up, activation and down for each ffw block (fused.py; non-packed
  formats). Slower on the H200 (s10c: qwen3-30b-a3b fp8 C1 295.8 vs 330.3 tok/s), so opt-in.
`moe_decode_routed` takes the router logits instead of the selection and has the kernel's gate/up programs
select the experts themselves (routed.py; chosen by the model where DGJAX_MOE_ROUTING=fused and `use_routed`).
Weights are expert-stacked arrays ([E, embed, ffw] gate/up, [E, ffw, embed] down) or quantized nodes standing
for them (`dgjax.quant`).
"""

from __future__ import annotations

import logging
from typing import Any

import jax
import jax.numpy as jnp

from dgjax.pallas.launch import choose_impl
from dgjax.pallas.moe_decode import fused, kernel, ref, routed
from dgjax.pallas.moe_routing.ref import RoutingRule

IMPLS = ("auto", "ref", "kernel")
ENV_VAR = "DGJAX_MOE_KERNEL"
FUSE_ENV_VAR = "DGJAX_MOE_FUSE"
FUSIONS = ("all", "none", "expert")
MAX_TOKENS = kernel.MAX_TOKENS
log = logging.getLogger(__name__)


def resolve_impl(impl: str | None = None) -> str:
    """The requested implementation: the argument, else $DGJAX_MOE_KERNEL, else "auto"."""
    return choose_impl(impl, ENV_VAR, IMPLS, "moe decode")


def fusion() -> str:
    """DGJAX_MOE_FUSE: "none" (default), "all" (the down stage sums and activates split gate/up partials) or
    "expert" (gate/up, activation and down in one kernel: fused.py)."""
    return choose_impl(None, FUSE_ENV_VAR, FUSIONS, "moe decode fusion", default="none")


def act_in_down() -> bool:
    """Whether the down stage sums and activates split gate/up partials (DGJAX_MOE_FUSE=all)."""
    return fusion() == "all"


def use_kernel(tokens: int, gate: Any, up: Any, down: Any, hidden_act: str, impl: str | None = None) -> bool:
    """Whether `moe_decode` with these arguments runs the kernel (else the reference)."""
    chosen = resolve_impl(impl)
    if chosen == "ref":
        return False
    supported = kernel.supports(tokens, gate, up, down, hidden_act)
    if chosen == "kernel" and not supported:
        log.warning("MoE decode kernel does not support %d tokens, %r, weights %s: using the reference",
                    tokens, hidden_act, [type(w).__name__ for w in (gate, up, down)])
    return supported and (chosen == "kernel" or jax.default_backend() == "gpu")


def moe_decode(
    x: jax.Array, expert_ids: jax.Array, weights: jax.Array, gate: Any, up: Any, down: Any,
    hidden_act: str = "silu", impl: str | None = None, config: kernel.Config | None = None,
) -> jax.Array:
    """sum_j weights[t, j] * down(act(gate(x_t)) * up(x_t)) over expert expert_ids[t, j] -> [T, embed].

    x [T, embed]; expert_ids int32 [T, top_k] (valid expert indices); weights [T, top_k]. `config` sets the
    kernel's launch knobs (default: `kernel.default_config`).
    """
    if use_kernel(x.shape[0], gate, up, down, hidden_act, impl):
        if fusion() == "expert" and config is None and fused.supports(x.shape[0], gate, up, down, hidden_act):
            return fused.moe_decode(x, expert_ids, weights, gate, up, down, hidden_act=hidden_act,
                                    interpret=jax.default_backend() != "gpu")
        return kernel.moe_decode(x, expert_ids, weights, gate, up, down, hidden_act=hidden_act, config=config,
                                 interpret=jax.default_backend() != "gpu", act_in_down=act_in_down(),
                                 carry_h=kernel.carries_h(x.dtype, down))  # static: a switch retraces
    return ref.moe_decode(x, expert_ids, weights, gate, up, down, hidden_act)


def use_routed(tokens: int, num_experts: int, rule: RoutingRule, gate: Any, up: Any, down: Any,
               hidden_act: str) -> bool:
    """Whether `moe_decode_routed` runs the kernel that selects experts in its gate/up stage (routed.py)."""
    return routed.supports(tokens, num_experts, rule) and use_kernel(tokens, gate, up, down, hidden_act)


def moe_decode_routed(x: jax.Array, logits: jax.Array, gate: Any, up: Any, down: Any, rule: RoutingRule,
                      hidden_act: str = "silu", score_bias: jax.Array | None = None,
                      valid: jax.Array | None = None) -> jax.Array:
    """moe_decode on moe_routing.ref.select_experts(logits, rule, score_bias, valid), the selection made by the
    kernel's gate/up programs (DGJAX_MOE_ROUTING=fused); callers check `use_routed` first. score_bias None:
    zeros; valid None: every row a real token (select_experts' defaults)."""
    n, e = logits.shape
    bias = jnp.zeros((e,), jnp.float32) if score_bias is None else score_bias
    valid = jnp.ones((n,), jnp.bool_) if valid is None else valid
    out, _, _ = routed.moe_decode_routed(x, logits, valid, bias, gate, up, down, rule=rule,
                                         hidden_act=hidden_act, interpret=jax.default_backend() != "gpu")
    return out
