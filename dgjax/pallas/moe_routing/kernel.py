"""Expert selection for up to 16 decode tokens in one Pallas kernel (Triton lowering).

Why: in a decode step the jnp selection (ref.py) is five to six tiny XLA kernels per MoE layer (softmax,
top-k, gathers, renormalization, the padding-row selects), each 1.1-1.8 us on an H200 for a few KB of data:
about 8 us of a qwen3-30b-a3b layer whose routed experts take 26 us, and as many launches again on the host
(benchmarks/results/2026-12-01-qwen3-30b-a3b-decode-profile-c1-nvidia-h200.md). One program does it all:
- loads the [T, E] float32 logits through masked index loads (T and E need not be powers of two; the tile
  is 16 rows x next_pow2(E) columns, -inf outside);
- softmax or sigmoid (+ score bias), then top-k as k rounds of (row max, lowest column holding it, mask it
  out): the order and tie-break lax.top_k gives (largest first, lower index first among equals);
- renormalization and routed scaling, the padding-row rule of ref.py, and masked stores of the [T, k] ids
  and weights.
Group-limited routing (DeepSeek-V3's n_group > topk_group) stays on ref.py.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas.moe_routing.ref import NORM_EPS, SCORING, RoutingRule

MAX_TOKENS = 16  # one row tile
MAX_EXPERTS = 1024
MAX_TOP_K = 16


def supports(tokens: int, num_experts: int, rule: RoutingRule) -> bool:
    """Whether the kernel handles this many tokens and experts under this rule (else use ref.py)."""
    return (1 <= tokens <= MAX_TOKENS and rule.scoring in SCORING and not rule.group_limited
            and 1 <= rule.top_k <= min(num_experts, MAX_TOP_K) and num_experts <= MAX_EXPERTS)


def _select_kernel(logits_ref, bias_ref, valid_ref, ids_ref, w_ref, *, tokens: int, experts: int,
                   rule: RoutingRule):
    rows, cols, kp = MAX_TOKENS, pl.next_power_of_2(experts), pl.next_power_of_2(rule.top_k)
    r = lax.broadcasted_iota(jnp.int32, (rows, cols), 0)
    c = lax.broadcasted_iota(jnp.int32, (rows, cols), 1)
    inside = (r < tokens) & (c < experts)
    logits = plgpu.load(logits_ref.at[jnp.minimum(r, tokens - 1), jnp.minimum(c, experts - 1)], mask=inside,
                        other=-jnp.inf)
    if rule.scoring == "softmax":
        top = jnp.max(logits, axis=1)
        top = jnp.where(top > -jnp.inf, top, 0.0)  # rows beyond T: all -inf
        e = jnp.where(inside, jnp.exp(logits - top[:, None]), 0.0)
        total = jnp.sum(e, axis=1)
        source = e / jnp.where(total > 0.0, total, 1.0)[:, None]
        choice = jnp.where(inside, source, -jnp.inf)
    else:
        source = jnp.where(inside, lax.logistic(logits), 0.0)
        bias = plgpu.load(bias_ref.at[jnp.where(c < experts, c, 0)], mask=c < experts, other=0.0)
        choice = jnp.where(inside, source + bias, -jnp.inf)
    kc = lax.broadcasted_iota(jnp.int32, (rows, kp), 1)
    ids = jnp.zeros((rows, kp), jnp.int32)
    wts = jnp.zeros((rows, kp), jnp.float32)
    for j in range(rule.top_k):  # static unroll: k rounds of (max, lowest index holding it, mask it out)
        best = jnp.max(choice, axis=1)
        idx = jnp.min(jnp.where(choice == best[:, None], c, cols), axis=1)
        idx = jnp.minimum(idx, experts - 1)  # NaN rows: never an out-of-range expert
        hit = c == idx[:, None]
        w = jnp.sum(jnp.where(hit, source, 0.0), axis=1)
        choice = jnp.where(hit, -jnp.inf, choice)
        ids = jnp.where(kc == j, idx[:, None], ids)
        wts = jnp.where(kc == j, w[:, None], wts)
    if rule.norm_topk_prob:
        wts = wts / (jnp.sum(wts, axis=1) + NORM_EPS)[:, None]
    wts = wts * rule.routed_scaling_factor
    rr = lax.broadcasted_iota(jnp.int32, (rows, kp), 0)
    row = lax.broadcasted_iota(jnp.int32, (rows,), 0)
    valid = plgpu.load(valid_ref.at[jnp.minimum(row, tokens - 1)], mask=row < tokens, other=0) != 0
    first = jnp.min(jnp.where(valid, row, rows))
    first = jnp.where(first == rows, 0, first)  # no valid row: row 0's experts (ref.py's argmax does too)
    first_ids = jnp.sum(jnp.where(rr == first, ids, 0), axis=0)
    ids = jnp.where(valid[:, None], ids, first_ids[None, :])
    wts = jnp.where(valid[:, None], wts, 0.0)
    # Masked, not clamped: the interpreter applies a masked store as read-select-write, so a clamped
    # index would write an old value over a real one.
    out = (rr < tokens) & (kc < rule.top_k)
    plgpu.store(ids_ref.at[rr, kc], ids, mask=out)
    plgpu.store(w_ref.at[rr, kc], wts, mask=out)


def _whole(shape):
    return pl.BlockSpec(shape, lambda: (0,) * len(shape))


@functools.partial(jax.jit, static_argnames=("rule", "interpret"))
def select_experts(logits: jax.Array, valid: jax.Array, score_bias: jax.Array, *, rule: RoutingRule,
                   interpret: bool = False) -> tuple[jax.Array, jax.Array]:
    """ref.select_experts(logits, rule, score_bias, valid) for T <= 16 tokens in one kernel.

    logits [T, E] (any float dtype; float32 inside); valid bool [T]; score_bias float32 [E] (zeros when the
    model has none; read only by sigmoid routing)."""
    t, e = logits.shape
    if not supports(t, e, rule):
        raise ValueError(f"the routing kernel does not support T={t}, E={e}, {rule}")
    k = rule.top_k
    ids, wts = pl.pallas_call(
        functools.partial(_select_kernel, tokens=t, experts=e, rule=rule),
        in_specs=[_whole((t, e)), _whole((e,)), _whole((t,))],
        out_specs=[_whole((t, k)), _whole((t, k))],
        out_shape=[jax.ShapeDtypeStruct((t, k), jnp.int32), jax.ShapeDtypeStruct((t, k), jnp.float32)],
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1),
        interpret=interpret,
        name=f"moe_select_{rule.scoring}_t{t}_e{e}_k{k}",
    )(logits.astype(jnp.float32), score_bias.astype(jnp.float32), valid.astype(jnp.int32))
    return ids, wts
