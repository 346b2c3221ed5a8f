"""The routed-experts entry point for prefill chunks (many tokens); picks the grouped-GEMM kernel or ragged_dot.

Dispatch (decided at trace time):
- impl "ref": ref.py (lax.ragged_dot) everywhere.
- impl "auto" (default): the kernel (kernel.py) on a GPU for more than MIN_TOKENS tokens where
  `kernel.supports` accepts the activation and weight formats; ref.py otherwise. On the H200
  (benchmarks/moe_prefill_check.py, 2026-12-01) it matched ref.py (bf16 exactly, fp8 within 4e-3) and ran
  a 2048-token qwen3-30b-a3b layer in 0.86 ms against ragged_dot's 26.4 ms.
- impl "kernel": the kernel at any token count on any platform (through the Pallas interpreter off GPU);
  with a logged warning, the reference where the kernel does not support the case.
`impl=None` reads DGJAX_MOE_PREFILL (auto | ref | kernel, default auto) at trace time.
"""

from __future__ import annotations

import logging
from typing import Any

import jax
import jax.numpy as jnp

from dgjax.pallas.launch import choose_impl
from dgjax.pallas.moe_prefill import kernel, ref

IMPLS = ("auto", "ref", "kernel")
ENV_VAR = "DGJAX_MOE_PREFILL"
MIN_TOKENS = 16  # up to here the MoE decode kernel (dgjax.pallas.moe_decode) reads only the routed experts
log = logging.getLogger(__name__)


def resolve_impl(impl: str | None = None) -> str:
    """The requested implementation: the argument, else $DGJAX_MOE_PREFILL, else "auto"."""
    return choose_impl(impl, ENV_VAR, IMPLS, "moe prefill")


def use_kernel(tokens: int, gate: Any, up: Any, down: Any, hidden_act: str, impl: str | None = None) -> bool:
    """Whether `grouped_mlp` / `moe_prefill` for `tokens` tokens with these arguments runs the kernel."""
    chosen = resolve_impl(impl)
    if chosen == "ref":
        return False
    supported = kernel.supports(gate, up, down, hidden_act)
    if chosen == "kernel":
        if not supported:
            log.warning("MoE prefill kernel does not support %r, weights %s: using the reference",
                        hidden_act, [type(w).__name__ for w in (gate, up, down)])
        return supported
    return supported and tokens > MIN_TOKENS and jax.default_backend() == "gpu"


def grouped_mlp(rows: jax.Array, group_sizes: jax.Array, gate: Any, up: Any, down: Any, hidden_act: str = "silu",
                impl: str | None = None, config: kernel.Config | None = None, tokens: int | None = None) -> jax.Array:
    """down(act(rows . gate) * (rows . up)) per expert group of expert-sorted rows -> [M, embed].

    group_sizes int [E] must sum to M. `tokens` (the chunk's token count, default M) feeds the dispatch.
    """
    if use_kernel(rows.shape[0] if tokens is None else tokens, gate, up, down, hidden_act, impl):
        return kernel.grouped_mlp(rows, group_sizes, gate, up, down, hidden_act=hidden_act, config=config,
                                  interpret=jax.default_backend() != "gpu")
    return ref.grouped_mlp(rows, group_sizes, gate, up, down, hidden_act)


def moe_prefill(x: jax.Array, expert_ids: jax.Array, weights: jax.Array, gate: Any, up: Any, down: Any,
                hidden_act: str = "silu", impl: str | None = None, config: kernel.Config | None = None) -> jax.Array:
    """sum_j weights[t, j] * down(act(gate(x_t)) * up(x_t)) over expert expert_ids[t, j] -> [T, embed]."""
    t, k = expert_ids.shape
    order, sizes = ref.sort_by_expert(expert_ids, gate.shape[0])
    out = grouped_mlp(jnp.take(x, order // k, axis=0), sizes, gate, up, down, hidden_act, impl, config, tokens=t)
    return ref.combine(out, order, weights, x.dtype)
