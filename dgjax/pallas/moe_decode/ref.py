"""Pure-jnp routed experts for a few decode tokens: the obviously-right version the kernel is checked against.

Every (token, expert) assignment gathers its expert's three weights (dequantized to float32 when they are
a quantized node), runs the gated MLP in float32 and scales the result by its routing weight; a token's
output is the float32 sum over its top_k assignments. The one deliberate rounding point is the one the
kernel has too: the hidden activation h = act(x.gate) * (x.up) is rounded to x's dtype before the down
projection (the kernel hands h from its first to its second stage in that dtype).
It reads an expert once per assignment, duplicates included: a reference, not a decode path.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from dgjax.quant import fp8_block, is_quantized

ACTIVATIONS = {"silu": jax.nn.silu, "swish": jax.nn.silu}


def dense_experts(w: Any, ids: jax.Array) -> jax.Array:
    """float32 [len(ids), in, out]: the experts `ids` of an expert-stacked weight (array or quantized node)."""
    if is_quantized(w):
        return w.take_experts(ids).dequantize(jnp.float32)
    return jnp.take(w, ids, axis=0).astype(jnp.float32)


def moe_decode(
    x: jax.Array, expert_ids: jax.Array, weights: jax.Array, gate: Any, up: Any, down: Any,
    hidden_act: str = "silu", a8_groups: tuple[int, int] | None = None, a8_terms: int = 1,
) -> jax.Array:
    """sum_j weights[t, j] * down(act(gate(x_t)) * up(x_t)) over expert expert_ids[t, j] -> [T, embed].

    x [T, embed]; expert_ids int [T, top_k]; weights [T, top_k]; gate/up stand for [E, embed, ffw] weights,
    down for [E, ffw, embed]. `a8_groups` (the two stages' K steps under DGJAX_FP8_DOT=a8): x and h are
    rounded as the fp8 x fp8 dot rounds them (`fp8_block.round_activations`; `a8_terms` 2 for
    DGJAX_FP8_DOT=a8x2) before their products.
    """
    if hidden_act not in ACTIVATIONS:
        raise ValueError(f"unsupported hidden_act {hidden_act!r}; supported: {sorted(ACTIVATIONS)}")
    t, k = expert_ids.shape
    flat = expert_ids.reshape(-1)
    dtype = x.dtype
    if a8_groups is not None:
        x = fp8_block.round_activations(x, a8_groups[0], a8_terms)
    rows = jnp.repeat(x.astype(jnp.float32), k, axis=0)  # row t * k + j: token t's j-th assignment
    hi = lax.Precision.HIGHEST
    g = jnp.einsum("ai,aif->af", rows, dense_experts(gate, flat), precision=hi)
    u = jnp.einsum("ai,aif->af", rows, dense_experts(up, flat), precision=hi)
    h = (ACTIVATIONS[hidden_act](g) * u).astype(dtype)
    if a8_groups is not None:
        h = fp8_block.round_activations(h, a8_groups[1], a8_terms)
    h = h.astype(jnp.float32)
    y = jnp.einsum("af,afo->ao", h, dense_experts(down, flat), precision=hi)
    y = y * weights.reshape(-1, 1).astype(jnp.float32)
    return y.reshape(t, k, -1).sum(axis=1).astype(dtype)
