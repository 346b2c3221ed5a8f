"""Expert selection for up to 16 decode tokens in one Pallas kernel (Triton lowering), one program per token.

Why: in a decode step the jnp selection (ref.py) is three small XLA kernels per MoE layer (ranks, ids and
values, weights: benchmarks/results/2026-12-01-s8-launch-counts-deviceless.md), each ~1.3-1.5 us on an
H200. A first version of this kernel (session 5) did it in one program for all tokens, as k serial rounds of
(row max, lowest index holding it, mask it out) over a 16 x E tile; it was slower in the engine than XLA's
kernels then (3.56 vs 3.34 ms of device time per qwen3-30b-a3b tick). This one ranks like ref.py, with
one program per token:
- the row's choice scores (logits; for sigmoid routers sigmoid(logits) + score bias) as a [1, E] row, E padded
  to a power of two with -inf;
- each expert's rank (how many experts come before it: larger score, or equal score and lower index, which
  is lax.top_k's order) as sums of [chunk, E] comparison tiles, in E / chunk steps (one step up to E = 128);
- ids and values as sums over a [k, E] hit tile (the id a max, so always in range);
- the weights (softmax over the picked logits, or the unbiased sigmoid scores), renormalization and routed
  scaling, and ref.py's padding rule: a padding row (valid False) ranks the first valid row's scores and
  gets weight 0.
Group-limited routing (DeepSeek-V3's n_group > topk_group) stays on ref.py.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas.launch import whole
from dgjax.pallas.moe_routing.ref import NORM_EPS, SCORING, RoutingRule

MAX_TOKENS = 16  # decode widths (one program each)
MAX_EXPERTS = 1024
MAX_TOP_K = 16


def supports(tokens: int, num_experts: int, rule: RoutingRule) -> bool:
    """Whether the kernel handles this many tokens and experts under this rule (else use ref.py)."""
    return (1 <= tokens <= MAX_TOKENS and rule.scoring in SCORING and not rule.group_limited
            and 1 <= rule.top_k <= min(num_experts, MAX_TOP_K) and num_experts <= MAX_EXPERTS)


RANK_TILE_PER_WARP = 4096  # elements of one [chunk, E] comparison tile, per warp (128 a thread)
DEFAULT_WARPS = 4


# ---------------------------------------------------------------- row helpers (also used by moe_decode.routed)


def valid_rows(valid_ref, tokens: int):
    """(rows iota [tp], valid bool [tp], first valid row: row 0 where none is valid)."""
    tp = pl.next_power_of_2(tokens)
    rows = lax.broadcasted_iota(jnp.int32, (tp,), 0)
    valid = plgpu.load(valid_ref.at[jnp.minimum(rows, tokens - 1)], mask=rows < tokens, other=0) != 0
    first = jnp.min(jnp.where(valid, rows, tp))
    return rows, valid, jnp.where(first == tp, 0, first)


def source_row(rows, valid, first, t):
    """(the row whose scores row t ranks: itself if valid, else the first valid row; whether t is valid)."""
    mine = jnp.sum(jnp.where((rows == t) & valid, 1, 0)) > 0
    return jnp.where(mine, t, first), mine


def row_scores(logits_ref, bias_ref, src, idx, ok, experts: int, rule: RoutingRule):
    """(weight source, choice score) of experts `idx` of row src, -inf / 0 where not `ok`."""
    x = plgpu.load(logits_ref.at[src + jnp.zeros_like(idx), jnp.minimum(idx, experts - 1)], mask=ok,
                   other=-jnp.inf)
    if rule.scoring == "softmax":
        return x, x
    sig = jnp.where(ok, lax.logistic(x), 0.0)
    bias = plgpu.load(bias_ref.at[jnp.minimum(idx, experts - 1)], mask=ok, other=0.0)
    return sig, jnp.where(ok, sig + bias, -jnp.inf)


def row_ranks(scores, choice, experts: int, num_warps: int = DEFAULT_WARPS):
    """int32 [1, ep]: each expert's rank in the row (how many come before it: larger choice score, or equal
    and lower index: lax.top_k's order), as sums of [chunk, ep] comparison tiles of about
    RANK_TILE_PER_WARP elements a warp. `scores(idx, ok)` gives (source, choice) of experts idx."""
    ep = choice.shape[1]
    chunk = max(1, min(ep, RANK_TILE_PER_WARP * num_warps // ep))
    col = lax.broadcasted_iota(jnp.int32, (1, ep), 1)

    def rank_step(c, rank):
        i = c * chunk + lax.broadcasted_iota(jnp.int32, (chunk, 1), 0)
        _, ci = scores(i, i < experts)
        before = (i < experts) & ((ci > choice) | ((ci == choice) & (i < col)))  # [chunk, ep]
        return rank + jnp.sum(before.astype(jnp.int32), axis=0, keepdims=True)

    return lax.fori_loop(0, ep // chunk, rank_step, jnp.zeros((1, ep), jnp.int32))


def top_k_weights(source, rank, experts: int, rule: RoutingRule):
    """(ids int32 [kp, 1], weights float32 [kp, 1], picked bool [kp, 1]) of the row's top_k experts from their
    ranks: the weights before the padding rule (renormalized, scaled)."""
    ep, kp = source.shape[1], pl.next_power_of_2(rule.top_k)
    col = lax.broadcasted_iota(jnp.int32, (1, ep), 1)
    inside = col < experts
    kk = lax.broadcasted_iota(jnp.int32, (kp, 1), 0)
    picked = kk < rule.top_k
    hit = (rank == kk) & inside & picked  # [kp, ep]
    ids = jnp.minimum(jnp.max(jnp.where(hit, col, 0), axis=1, keepdims=True), experts - 1)  # [kp, 1]
    top = jnp.sum(jnp.where(hit, source, 0.0), axis=1, keepdims=True)
    if rule.scoring == "softmax":
        if rule.norm_topk_prob:  # a softmax over the k picked logits
            peak = jnp.max(jnp.where(picked, top, -jnp.inf))
            e = jnp.where(picked, jnp.exp(top - peak), 0.0)
            wts = e / jnp.sum(e)
        else:  # their probabilities under the full softmax
            peak = jnp.max(source)
            lse = peak + jnp.log(jnp.sum(jnp.where(inside, jnp.exp(source - peak), 0.0)))
            wts = jnp.exp(top - lse)
    else:
        wts = top / (jnp.sum(jnp.where(picked, top, 0.0)) + NORM_EPS) if rule.norm_topk_prob else top
    return ids, wts * rule.routed_scaling_factor, picked


def _select_kernel(logits_ref, bias_ref, valid_ref, ids_ref, w_ref, *, tokens: int, experts: int,
                   rule: RoutingRule, num_warps: int):
    ep = pl.next_power_of_2(experts)
    t = pl.program_id(0)
    rows, valid, first = valid_rows(valid_ref, tokens)
    src, mine = source_row(rows, valid, first, t)

    def scores(idx, ok):
        return row_scores(logits_ref, bias_ref, src, idx, ok, experts, rule)

    col = lax.broadcasted_iota(jnp.int32, (1, ep), 1)
    source, choice = scores(col, col < experts)  # [1, ep]
    ids, wts, picked = top_k_weights(source, row_ranks(scores, choice, experts, num_warps), experts, rule)
    wts = jnp.where(mine, wts, 0.0)
    # Masked, not clamped: the interpreter applies a masked store as read-select-write, so a clamped
    # index would write an old value over a real one.
    kk = lax.broadcasted_iota(jnp.int32, (pl.next_power_of_2(rule.top_k), 1), 0)
    row = t + jnp.zeros_like(kk)
    plgpu.store(ids_ref.at[row, kk], ids, mask=picked)
    plgpu.store(w_ref.at[row, kk], wts, mask=picked)


@functools.partial(jax.jit, static_argnames=("rule", "num_warps", "interpret"))
def select_experts(logits: jax.Array, valid: jax.Array, score_bias: jax.Array, *, rule: RoutingRule,
                   num_warps: int = DEFAULT_WARPS, interpret: bool = False) -> tuple[jax.Array, jax.Array]:
    """ref.select_experts(logits, rule, score_bias, valid) for T <= 16 tokens in one kernel.

    logits [T, E] (any float dtype; float32 inside); valid bool [T]; score_bias float32 [E] (zeros when the
    model has none; read only by sigmoid routing). num_warps: a power of two; with one warp every reduction
    of the ranking stays inside the warp (shuffles, no shared-memory round trip)."""
    t, e = logits.shape
    if not supports(t, e, rule):
        raise ValueError(f"the routing kernel does not support T={t}, E={e}, {rule}")
    if num_warps < 1 or num_warps & (num_warps - 1):
        raise ValueError(f"num_warps must be a power of two, got {num_warps}")
    k = rule.top_k
    ids, wts = pl.pallas_call(
        functools.partial(_select_kernel, tokens=t, experts=e, rule=rule, num_warps=num_warps),
        grid=(t,),
        in_specs=[whole((t, e)), whole((e,)), whole((t,))],
        out_specs=[whole((t, k)), whole((t, k))],
        out_shape=[jax.ShapeDtypeStruct((t, k), jnp.int32), jax.ShapeDtypeStruct((t, k), jnp.float32)],
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=1),
        interpret=interpret,
        name=f"moe_select_{rule.scoring}_t{t}_e{e}_k{k}_w{num_warps}",
    )(logits.astype(jnp.float32), score_bias.astype(jnp.float32), valid.astype(jnp.int32))
    return ids, wts
