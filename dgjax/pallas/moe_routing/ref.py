"""Pure-jnp expert selection: the obviously-right version the kernel is checked against, and the path every
platform and shape the kernel does not take (prefill chunks, group-limited routing, sharded meshes) runs.

From router logits float32 [N, experts]:
- softmax (HF Qwen3-MoE): top-k of softmax(logits), weighted by those probabilities. Computed without the
  full-width softmax: softmax is monotonic, so the top-k of the logits are the same experts, and their
  probabilities are exp(logit - logsumexp(logits)); renormalized, they are a softmax over the k picked
  logits alone. (XLA had run the full softmax, the top-k, the renormalization and the padding rule as
  separate kernels in every decode layer; on the H200 dropping the full softmax left device time per tick
  unchanged, 3.22 vs 3.23 ms for qwen3-30b-a3b bf16, benchmarks/results/2026-12-01-s6a-fp8-f16-dot.md.)
- sigmoid (HF Glm4Moe / DeepSeek-V3 "noaux_tc"): scores = sigmoid(logits); experts chosen on scores +
  score_bias within the topk_group best groups (two best scores per group), weighted by the unbiased scores;
then optional renormalization of the k weights and `routed_scaling_factor`.
Top-k itself runs by ranking for decode-sized inputs (`top_k_by_rank`, exactly lax.top_k's result), which
replaces XLA's sort kernel with two reductions.
Padding rows (valid False) take the first valid row's experts with weight 0: the MoE decode kernel reads
every distinct routed expert, so a padding row routed on its own could double a single stream's reads.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from dgjax.pallas.launch import choose_impl

SCORING = ("softmax", "sigmoid")
# Sigmoid routers renormalize with this epsilon (HF Glm4Moe / DeepSeek-V3).
NORM_EPS = 1e-20


@dataclasses.dataclass(frozen=True)
class RoutingRule:
    """The model's routing, static under jit (from ModelConfig)."""

    scoring: str  # softmax | sigmoid
    top_k: int
    norm_topk_prob: bool = False
    routed_scaling_factor: float = 1.0
    n_group: int = 1
    topk_group: int = 1

    @property
    def group_limited(self) -> bool:
        return self.n_group > 1 and self.topk_group < self.n_group


def _keep_top_groups(choice: jax.Array, n_group: int, topk_group: int) -> jax.Array:
    """-inf outside the topk_group groups whose two best scores sum highest."""
    n, num_experts = choice.shape
    grouped = choice.reshape(n, n_group, num_experts // n_group)
    group_scores = lax.top_k(grouped, 2)[0].sum(-1)
    _, top_groups = lax.top_k(group_scores, topk_group)
    keep = jax.nn.one_hot(top_groups, n_group, dtype=jnp.int32).sum(1) > 0
    return jnp.where(keep[:, :, None], grouped, -jnp.inf).reshape(n, num_experts)


PAD_ENV_VAR = "DGJAX_ROUTING_PAD"
PAD_MODES = ("logits", "ids")


def pad_mode() -> str:
    """How padding rows get the first valid row's experts (DGJAX_ROUTING_PAD, read at trace time): "logits"
    (default; they rank its logits) or "ids" (they rank their own and its ids replace theirs afterwards,
    one launch more at widths > 1). On the H200 "logits" won: qwen3-30b-a3b fp8 C1 355.2 vs 347.3 tok/s
    (benchmarks/results/2026-12-01-s8d-*)."""
    return choose_impl(None, PAD_ENV_VAR, PAD_MODES, "routing padding", default="logits")


def ids_like_first_valid(ids: jax.Array, valid: jax.Array) -> jax.Array:
    """Padding rows (valid False) get the first valid row's ids (row 0's if none is valid)."""
    return jnp.where(valid[:, None], ids, ids[jnp.argmax(valid)][None, :])


def logits_like_first_valid(logits: jax.Array, valid: jax.Array) -> jax.Array:
    """Padding rows (valid False) take the first valid row's logits (row 0's if none is valid), so they select
    its experts; `select_experts` then zeroes their weights. Replacing the logits before the selection, not
    the ids after it, lets XLA fold the replacement into the selection's first kernel (the ids' select was a
    launch per MoE layer of its own)."""
    first = jnp.argmax(valid)
    return jnp.where(valid[:, None], logits, logits[first][None, :])


# Below this many compares (rows x experts x experts) top-k is computed by ranking (`top_k_by_rank`).
RANK_TOP_K_MAX_COMPARES = 1 << 20


def _index_max_value_sum(a, b):
    return jnp.maximum(a[0], b[0]), a[1] + b[1]


def top_k_by_rank(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """lax.top_k's result for [N, E] (descending; ties to the lower index) by counting, for every element,
    the elements ranked above it: two small reductions instead of a sort.

    Why: on the GPU XLA lowers lax.top_k of a decode tick's router logits to a sort kernel (3.3 µs per MoE
    layer on the H200, benchmarks/results/2026-12-01-s6c-kernel-breakdown.md); the ranks are one fused
    compare-and-sum over [N, E, E]. Ids stay in range, so NaN logits (ranks then not a permutation) cannot
    send a kernel outside the expert stack.
    """
    n, e = x.shape
    idx = lax.broadcasted_iota(jnp.int32, (e,), 0)
    xi, xj = x[:, :, None], x[:, None, :]
    above = (xj > xi) | ((xj == xi) & (idx[None, None, :] < idx[None, :, None]))
    rank = above.sum(-1, dtype=jnp.int32)  # [N, E]: how many elements come before element i
    hit = rank[:, None, :] == lax.broadcasted_iota(jnp.int32, (k,), 0)[None, :, None]  # [N, k, E]
    # ids (the hit's index: a max, so always a valid expert) and values (the hit's value: a sum, exact with
    # one hit) as one two-operand reduction, one kernel; a gather of the values and a clamp of the ids after
    # it had been two launches more
    ids, top = lax.reduce((jnp.where(hit, idx, 0), jnp.where(hit, x[:, None, :], 0.0)), (jnp.int32(0), x.dtype.type(0)),
                          _index_max_value_sum, (2,))
    return top, ids


def top_k(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """lax.top_k, by ranking for decode-sized inputs (see `top_k_by_rank`)."""
    n, e = x.shape
    return top_k_by_rank(x, k) if n * e * e <= RANK_TOP_K_MAX_COMPARES else lax.top_k(x, k)


def select_experts(logits: jax.Array, rule: RoutingRule, score_bias: jax.Array | None = None,
                   valid: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """(ids int32 [N, top_k], weights float32 [N, top_k]) from router logits [N, experts]; see module doc."""
    logits = logits.astype(jnp.float32)
    pad = None if valid is None else pad_mode()
    if pad == "logits":
        logits = logits_like_first_valid(logits, valid)
    k = rule.top_k
    if rule.scoring == "softmax":
        top, ids = top_k(logits, k)
        if rule.norm_topk_prob:  # the renormalized probabilities: a softmax over the k picked logits
            weights = jax.nn.softmax(top, axis=-1)
        else:
            weights = jnp.exp(top - jax.nn.logsumexp(logits, axis=-1, keepdims=True))
    elif rule.scoring == "sigmoid":
        scores = jax.nn.sigmoid(logits)
        choice = scores if score_bias is None else scores + score_bias.astype(jnp.float32)
        if rule.group_limited:
            choice = _keep_top_groups(choice, rule.n_group, rule.topk_group)
        _, ids = top_k(choice, k)
        weights = jnp.take_along_axis(scores, ids, axis=-1)
        if rule.norm_topk_prob:
            weights = weights / (weights.sum(-1, keepdims=True) + NORM_EPS)
    else:
        raise ValueError(f"unsupported moe_scoring_func {rule.scoring!r} ({' | '.join(SCORING)})")
    ids, weights = ids.astype(jnp.int32), weights * rule.routed_scaling_factor
    if valid is not None:
        ids = ids_like_first_valid(ids, valid) if pad == "ids" else ids
        weights = jnp.where(valid[:, None], weights, jnp.zeros_like(weights))
    return ids, weights
