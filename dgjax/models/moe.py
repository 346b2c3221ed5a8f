"""Mixture of experts: the router, the routed experts' compute, and the MoE block (plus shared expert).

Routed expert weights are stacked per layer and stored input-major like every dgjax weight:
gate/up [experts, embed, moe_ffw], down [experts, moe_ffw, embed]. Model code calls `moe_block`; the
expert compute goes through `moe_experts` -> `expert_matmul`, the places a kernel or a quantized weight
format plugs in later. Two plain-JAX reference paths, chosen by the static token count:
- "ragged": sort the (token, expert) assignments by expert and run `lax.ragged_dot` per projection. It
  streams every expert's weights whatever the routing: the baseline the MoE benchmarks print.
- "gather": gather each assignment's expert weight and einsum: reads only the routed experts (twice, as
  XLA materializes the gathered copy), so it wins while tokens * top_k is small against the expert count.
`impl=None` reads DGJAX_MOE (auto | ragged | gather, default auto) at trace time; forcing "gather" on
large token counts (prefill chunks) materializes tokens * top_k expert copies.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax import lax

from dgjax.config import ModelConfig
from dgjax.quant import is_quantized, reference_expert_matmul
from dgjax.models import blocks
from dgjax.models.ops import matmul
from dgjax.models.params import ParamSpec, normal_init, zeros_init
from dgjax.pallas import moe_decode, moe_prefill, moe_routing
from dgjax.pallas.launch import choose_impl

IMPLS = ("auto", "ragged", "gather")
ENV_VAR = "DGJAX_MOE"
# "auto" gathers while assignments * GATHER_FACTOR <= experts: on an H200 one token to 8 of 128 experts
# took 131 µs gathered vs 185 µs through ragged_dot (REFERENCE.md), and the gathered copy grows with
# the assignments while ragged_dot's cost stays flat.
GATHER_FACTOR = 4


@struct.dataclass
class RouterParams:
    weight: Any  # [embed, experts]
    score_bias: Any = None  # [experts] float32 e_score_correction_bias: added for selection only


@struct.dataclass
class ExpertParams:
    gate: Any  # [experts, embed, moe_ffw]
    up: Any  # [experts, embed, moe_ffw]
    down: Any  # [experts, moe_ffw, embed]


@struct.dataclass
class MoEParams:
    router: RouterParams
    experts: ExpertParams
    shared: Any = None  # blocks.MLPParams of the always-on shared expert(s), or None


def router_dtype(cfg: ModelConfig, dtype: Any) -> Any:
    """Sigmoid routers (GLM, DeepSeek) stay float32 like HF's `_keep_in_fp32_modules_strict`."""
    return jnp.float32 if cfg.moe_scoring_func == "sigmoid" else dtype


def moe_specs(cfg: ModelConfig, dtype: Any) -> MoEParams:
    e, n, f = cfg.hidden_size, cfg.num_experts, cfg.moe_intermediate_size
    w = lambda shape, axes: ParamSpec(shape, dtype, axes, normal_init())  # noqa: E731
    shared = None
    if cfg.shared_expert_intermediate_size:
        shared = blocks.mlp_specs(cfg, dtype, intermediate_size=cfg.shared_expert_intermediate_size)
    return MoEParams(
        router=RouterParams(
            weight=ParamSpec((e, n), router_dtype(cfg, dtype), ("embed", None), normal_init()),
            score_bias=ParamSpec((n,), jnp.float32, (None,), zeros_init) if cfg.moe_score_correction_bias else None,
        ),
        experts=ExpertParams(
            gate=w((n, e, f), ("experts", "embed", "moe_ffw")),
            up=w((n, e, f), ("experts", "embed", "moe_ffw")),
            down=w((n, f, e), ("experts", "moe_ffw", "embed")),
        ),
        shared=shared,
    )


# ---------------------------------------------------------------- router


def routing_rule(cfg: ModelConfig) -> moe_routing.RoutingRule:
    return moe_routing.RoutingRule(
        scoring=cfg.moe_scoring_func, top_k=cfg.num_experts_per_tok, norm_topk_prob=cfg.norm_topk_prob,
        routed_scaling_factor=cfg.routed_scaling_factor, n_group=cfg.n_group, topk_group=cfg.topk_group)


def route(p: RouterParams, x: jax.Array, cfg: ModelConfig, valid: jax.Array | None = None
          ) -> tuple[jax.Array, jax.Array]:
    """Each token's experts: (ids int32 [N, top_k], weights float32 [N, top_k]) for x [N, embed].

    Router logits in x's dtype for softmax routers (as HF Qwen3-MoE computes them), float32 for sigmoid
    ones; the selection (dgjax.pallas.moe_routing: top-k, renormalization, scaling, and padding rows, where
    `valid` [N] is False, sharing the first real row's experts at weight 0) is one kernel in decode steps.
    """
    return moe_routing.select_experts(router_logits(p, x, cfg), routing_rule(cfg), p.score_bias, valid)


def router_logits(p: RouterParams, x: jax.Array, cfg: ModelConfig) -> jax.Array:
    """float32 [N, experts]: in x's dtype for softmax routers (as HF Qwen3-MoE computes them), float32 for
    sigmoid ones."""
    if cfg.moe_scoring_func == "sigmoid":
        return matmul(x.astype(jnp.float32), p.weight.astype(jnp.float32))
    return matmul(x, p.weight).astype(jnp.float32)


# ---------------------------------------------------------------- experts


def _is_plain(w: Any) -> bool:
    return isinstance(w, (jax.Array, np.ndarray))


def expert_matmul(
    x: jax.Array, w: Any, *, group_sizes: jax.Array | None = None, expert_ids: jax.Array | None = None
) -> jax.Array:
    """Row-wise x [M, in] . w[expert of the row] with w [experts, in, out]; float32 accumulation, x's dtype.

    Exactly one of: `group_sizes` [experts] (rows sorted by expert, lax.ragged_dot) or `expert_ids` [M]
    (each row's expert; the weights are gathered). Weight formats other than plain arrays add a branch here.
    """
    if is_quantized(w):  # dequantizes only the routed experts in the gather form
        return reference_expert_matmul(x, w, group_sizes=group_sizes, expert_ids=expert_ids)
    if not _is_plain(w):
        raise NotImplementedError(
            f"expert_matmul has no implementation for expert weights of type {type(w).__name__} yet; "
            "plain arrays [experts, in, out] and dgjax.quant nodes are supported"
        )
    if (group_sizes is None) == (expert_ids is None):
        raise ValueError("expert_matmul needs exactly one of group_sizes (ragged) or expert_ids (gather)")
    if group_sizes is not None:
        out = lax.ragged_dot(x, w.astype(x.dtype), group_sizes, preferred_element_type=jnp.float32)
    else:
        picked = jnp.take(w, expert_ids, axis=0).astype(x.dtype)
        out = jnp.einsum("mi,mio->mo", x, picked, preferred_element_type=jnp.float32)
    return out.astype(x.dtype)


def resolve_impl(impl: str | None, assignments: int, num_experts: int) -> str:
    """"ragged" or "gather": the argument, else $DGJAX_MOE, else auto (by the assignment count)."""
    chosen = choose_impl(impl, ENV_VAR, IMPLS, "moe")
    if chosen == "auto":
        return "gather" if assignments * GATHER_FACTOR <= num_experts else "ragged"
    return chosen


def moe_experts(
    x: jax.Array, expert_ids: jax.Array, weights: jax.Array, p: ExpertParams, hidden_act: str,
    impl: str | None = None,
) -> jax.Array:
    """sum_j weights[:, j] * down(act(gate(x)) * up(x)) through expert expert_ids[:, j]; x [N, embed].

    Decode steps (N <= moe_decode.MAX_TOKENS) go to the MoE decode kernel where its api picks it (on a GPU,
    or DGJAX_MOE_KERNEL=kernel), unless a reference path was asked for (impl or DGJAX_MOE ragged / gather).
    The ragged path's grouped MLP goes to the MoE prefill kernel (grouped GEMM) where its api picks it (on a
    GPU for prefill chunks, or DGJAX_MOE_PREFILL=kernel), again only while DGJAX_MOE is auto.
    """
    n, k = expert_ids.shape
    auto = _auto(impl)
    if auto and n <= moe_decode.MAX_TOKENS and moe_decode.use_kernel(n, p.gate, p.up, p.down, hidden_act):
        return moe_decode.moe_decode(x, expert_ids, weights, p.gate, p.up, p.down, hidden_act, impl="kernel")
    num_experts = p.gate.shape[0]
    act = blocks.activation(hidden_act)
    flat_ids = expert_ids.reshape(-1)
    if resolve_impl(impl, n * k, num_experts) == "gather":
        rows = jnp.repeat(x, k, axis=0)  # row t * k + j: token t's j-th expert
        route_kw = dict(expert_ids=flat_ids)
    else:
        order = jnp.argsort(flat_ids, stable=True)
        rows = jnp.take(x, order // k, axis=0)
        route_kw = dict(group_sizes=jnp.bincount(flat_ids, length=num_experts).astype(jnp.int32))
    if "group_sizes" in route_kw and auto and moe_prefill.use_kernel(n, p.gate, p.up, p.down, hidden_act):
        out = moe_prefill.grouped_mlp(rows, route_kw["group_sizes"], p.gate, p.up, p.down, hidden_act,
                                      impl="kernel", tokens=n)
    else:
        h = act(expert_matmul(rows, p.gate, **route_kw)) * expert_matmul(rows, p.up, **route_kw)
        out = expert_matmul(h, p.down, **route_kw)
    if "group_sizes" in route_kw:
        out = jnp.zeros_like(out).at[order].set(out)  # back to token-major order
    out = out.reshape(n, k, -1).astype(jnp.float32) * weights[..., None].astype(jnp.float32)
    return out.sum(axis=1).astype(x.dtype)


# ---------------------------------------------------------------- block


def moe_block(p: MoEParams, x: jax.Array, cfg: ModelConfig, impl: str | None = None,
              valid: jax.Array | None = None) -> jax.Array:
    """The sparse MLP of x [..., embed]: routed experts plus the shared expert if the model has one.

    `valid` (bool, x's leading shape): which rows are real tokens; padding rows then read no expert of
    their own (moe_routing's padding rule) and their output is meaningless."""
    with jax.named_scope("moe"):
        flat = x.reshape(-1, x.shape[-1])
        flat_valid = None if valid is None else valid.reshape(-1)
        if _routed_in_kernel(p, flat.shape[0], cfg, impl):  # DGJAX_MOE_ROUTING=fused
            with jax.named_scope("router"):
                logits = router_logits(p.router, flat, cfg)
            with jax.named_scope("experts"):
                y = moe_decode.moe_decode_routed(flat, logits, p.experts.gate, p.experts.up, p.experts.down,
                                                 routing_rule(cfg), cfg.hidden_act, p.router.score_bias,
                                                 flat_valid).reshape(x.shape)
        else:
            with jax.named_scope("router"):
                ids, weights = route(p.router, flat, cfg, flat_valid)
            with jax.named_scope("experts"):
                y = moe_experts(flat, ids, weights, p.experts, cfg.hidden_act, impl).reshape(x.shape)
        if p.shared is not None:
            with jax.named_scope("shared_expert"):
                y = y + blocks.gated_mlp(p.shared, x, cfg.hidden_act)
        return y


def _auto(impl: str | None) -> bool:
    """Whether the expert path is left to the kernels' apis (impl or $DGJAX_MOE "auto")."""
    return choose_impl(impl, ENV_VAR, IMPLS, "moe") == "auto"


def _routed_in_kernel(p: MoEParams, n: int, cfg: ModelConfig, impl: str | None) -> bool:
    """The decode kernel selects the experts itself: asked for (DGJAX_MOE_ROUTING=fused), the expert path on
    auto, and the routed kernel takes this step of n tokens (moe_decode.use_routed)."""
    return (_auto(impl) and moe_routing.fused_requested()
            and moe_decode.use_routed(n, p.experts.gate.shape[0], routing_rule(cfg), p.experts.gate, p.experts.up,
                                      p.experts.down, cfg.hidden_act))


def feed_forward(p: Any, x: jax.Array, cfg: ModelConfig, valid: jax.Array | None = None) -> jax.Array:
    """A decoder layer's MLP: a MoE block or a dense SwiGLU, by the parameters' type."""
    if isinstance(p, MoEParams):
        return moe_block(p, x, cfg, valid=valid)
    return blocks.gated_mlp(p, x, cfg.hidden_act)
