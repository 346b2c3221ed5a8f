"""The MoE decode kernel with the expert selection inside its gate/up stage (DGJAX_MOE_ROUTING=fused).

Why: between the router dot and the experts a decode layer otherwise runs the selection as launches of its
own: three XLA fusions for softmax routers (qwen3-30b-a3b), or moe_routing's kernel (sigmoid routers, GLM),
~1.5 µs each on the H200 and as long as the three (session 11). Here every gate/up program ranks its token's
router logits itself (moe_routing.kernel's row helpers: one [E, E] comparison tile at E = 128), takes the
expert ranked at its slot, and checks the earlier tokens' rows for the same expert (one [1, E] comparison
each) to keep the read-each-expert-once rule; the programs of a slot's first column block and split write
its expert id and routing weight for the down stage. The price: the ranking sits before the program's first
weight load, whose address depends on the expert. Selection and weights are moe_routing.ref's (top-k by
rank, softmax or sigmoid scoring with score bias, renormalization, scaling, padding rows ranking the first
valid row's logits at weight 0); group-limited routing is not taken.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas.launch import Launch, whole
from dgjax.pallas.moe_decode import kernel
from dgjax.pallas.moe_decode.tiles import operand
from dgjax.pallas.moe_routing import kernel as routing
from dgjax.pallas.moe_routing.ref import RoutingRule


def supports(tokens: int, num_experts: int, rule: RoutingRule) -> bool:
    """Whether the gate/up stage can select this routing's experts itself (the selection kernel's limits)."""
    return routing.supports(tokens, num_experts, rule)


def slot_route(logits_ref, bias_ref, valid_ref, slot, *, tokens: int, experts: int, rule: RoutingRule):
    """(expert, live, routing weight) of slot = t * top_k + j: the expert token t ranks j-th; live where no
    earlier token picked it (the slot that reads it); the weight as moe_routing.ref gives it (0 on padding rows)."""
    k, ep = rule.top_k, pl.next_power_of_2(experts)
    t, j = slot // k, slot % k
    rows, valid, first = routing.valid_rows(valid_ref, tokens)
    col = lax.broadcasted_iota(jnp.int32, (1, ep), 1)
    inside = col < experts

    def row(r):
        src, mine = routing.source_row(rows, valid, first, r)
        scores = functools.partial(routing.row_scores, logits_ref, bias_ref, src, experts=experts, rule=rule)
        source, choice = scores(col, inside)
        return scores, source, choice, mine

    scores, source, choice, mine = row(t)
    ids, wts, _ = routing.top_k_weights(source, routing.row_ranks(scores, choice, experts), experts, rule)
    kk = lax.broadcasted_iota(jnp.int32, ids.shape, 0)
    expert = jnp.sum(jnp.where(kk == j, ids, 0))
    weight = jnp.where(mine, jnp.sum(jnp.where(kk == j, wts, 0.0)), 0.0)
    live = jnp.bool_(True)
    for r in range(tokens - 1):  # an earlier row holding the expert among its top_k reads it instead
        _, _, c_r, _ = row(r)
        ce = jnp.max(jnp.where(col == expert, c_r, -jnp.inf))
        rank = jnp.sum((inside & ((c_r > ce) | ((c_r == ce) & (col < expert)))).astype(jnp.int32))
        live = live & ~((r < t) & (rank < k))
    return expert, live, weight


def _gate_up_routed_kernel(logits_ref, bias_ref, valid_ref, x_ref, *refs, op, tokens: int, experts: int,
                           rule: RoutingRule, launch: Launch, fused: bool):
    n_w = op.num_arrays
    stage_outs, (ids_out, wts_out) = refs[2 * n_w: -2], refs[-2:]
    a = pl.program_id(0)
    expert, live, weight = slot_route(logits_ref, bias_ref, valid_ref, a, tokens=tokens, experts=experts,
                                      rule=rule)
    writer = jnp.zeros((1,), jnp.bool_) | ((pl.program_id(1) == 0) & (pl.program_id(2) == 0))
    at = a + jnp.zeros((1,), jnp.int32)
    plgpu.store(ids_out.at[at], expert + jnp.zeros((1,), jnp.int32), mask=writer)
    plgpu.store(wts_out.at[at], weight + jnp.zeros((1,), jnp.float32), mask=writer)
    kernel.gate_up_body(x_ref, refs[:n_w], refs[n_w: 2 * n_w], stage_outs, expert, live, op=op, tokens=tokens,
                        launch=launch, fused=fused)


def gate_up_routed_stage(x, logits, valid, bias, gate, up, rule: RoutingRule, launch: Launch, interpret: bool):
    """(h as kernel.gate_up_stage gives it, ids int32 [T * top_k], weights float32 [T * top_k]) with the
    selection done by the stage's programs."""
    (op, g_arrays), (_, u_arrays) = operand(gate), operand(up)
    kernel.check_launch(op, launch)
    t, e = logits.shape
    a = t * rule.top_k
    out_shape, out_specs = kernel.stage_outputs(x, op, a, launch)
    out_shape += [jax.ShapeDtypeStruct((a,), jnp.int32), jax.ShapeDtypeStruct((a,), jnp.float32)]
    out_specs += [whole((a,)), whole((a,))]
    body = functools.partial(_gate_up_routed_kernel, op=op, tokens=t, experts=e, rule=rule, launch=launch,
                             fused=launch.splits == 1)
    *outs, ids, wts = pl.pallas_call(
        body,
        grid=(a, op.n // launch.block_n, launch.splits),
        in_specs=[whole(logits.shape), whole(bias.shape), whole(valid.shape), whole(x.shape)]
        + [whole(w.shape) for w in g_arrays + u_arrays],
        out_specs=out_specs,
        out_shape=out_shape,
        compiler_params=kernel.params(launch),
        interpret=interpret,
        name=f"moe_gate_up_routed_{rule.scoring}_{op.fmt}_t{t}_{launch.tag()}",
    )(logits.astype(jnp.float32), bias.astype(jnp.float32), valid.astype(jnp.int32), x, *g_arrays, *u_arrays)
    return kernel.finish_gate_up(outs, x, launch, act_in_down=False), ids, wts


@functools.partial(jax.jit, static_argnames=("rule", "hidden_act", "config", "interpret"))
def moe_decode_routed(x, logits, valid, bias, gate, up, down, *, rule: RoutingRule, hidden_act: str = "silu",
                      config: kernel.Config | None = None, interpret: bool = False):
    """(out [T, embed] in x's dtype, ids [T, top_k], weights [T, top_k]): moe_routing.ref.select_experts on
    the router logits [T, E] (float32 inside; valid bool [T]; score bias [E]) and kernel.moe_decode with them,
    the selection made by the gate/up programs."""
    t, e = logits.shape
    k = rule.top_k
    if not (supports(t, e, rule) and kernel.supports(t, gate, up, down, hidden_act)):
        raise ValueError(f"the routed MoE decode kernel does not support T={t}, E={e}, {rule}, {hidden_act!r}")
    cfg = config or kernel.default_config(gate, down, t, k)
    h, ids, wts = gate_up_routed_stage(x, logits, valid, bias, gate, up, rule, cfg.gate_up, interpret)
    parts = kernel.down_stage(h, ids, wts, down, k, cfg.down, interpret)
    return parts.sum(axis=(0, 1)).astype(x.dtype), ids.reshape(t, k), wts.reshape(t, k)
