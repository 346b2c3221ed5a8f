"""Pure-jnp routed experts of a prefill chunk: `lax.ragged_dot` over expert-sorted rows, the kernel's truth.

The math of dgjax.models.moe's ragged path with one deliberate difference the kernel shares: gate and up
stay float32 through the activation, and h = act(x.gate) * (x.up) is rounded to x's dtype once, before
the down projection. Quantized stacks are dequantized to x's dtype (`reference_expert_matmul`'s rule).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from dgjax.quant import is_quantized

ACTIVATIONS = {"silu": jax.nn.silu, "swish": jax.nn.silu}


def _ragged(x: jax.Array, w: Any, group_sizes: jax.Array) -> jax.Array:
    dense = w.dequantize(x.dtype) if is_quantized(w) else w.astype(x.dtype)
    return lax.ragged_dot(x, dense, group_sizes, preferred_element_type=jnp.float32)


def grouped_mlp(rows: jax.Array, group_sizes: jax.Array, gate: Any, up: Any, down: Any,
                hidden_act: str = "silu") -> jax.Array:
    """down(act(rows . gate) * (rows . up)) per expert group -> [M, embed] in rows' dtype.

    rows [M, embed] sorted by expert; group_sizes int [E] summing to M; gate/up stand for [E, embed, ffw],
    down for [E, ffw, embed].
    """
    if hidden_act not in ACTIVATIONS:
        raise ValueError(f"unsupported hidden_act {hidden_act!r}; supported: {sorted(ACTIVATIONS)}")
    sizes = group_sizes.astype(jnp.int32)
    g, u = _ragged(rows, gate, sizes), _ragged(rows, up, sizes)
    h = (ACTIVATIONS[hidden_act](g) * u).astype(rows.dtype)
    return _ragged(h, down, sizes).astype(rows.dtype)


def sort_by_expert(expert_ids: jax.Array, num_experts: int) -> tuple[jax.Array, jax.Array]:
    """(order, group_sizes): assignment a = t * top_k + j sorted by expert (stable), and rows per expert."""
    flat = expert_ids.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    return order, jnp.bincount(flat, length=num_experts).astype(jnp.int32)


def combine(sorted_out: jax.Array, order: jax.Array, weights: jax.Array, dtype) -> jax.Array:
    """Expert-sorted outputs back to tokens: sum_j weights[t, j] * out[t, j] in float32 -> [T, embed]."""
    t, k = weights.shape
    out = jnp.zeros_like(sorted_out).at[order].set(sorted_out)
    out = out.reshape(t, k, -1).astype(jnp.float32) * weights[..., None].astype(jnp.float32)
    return out.sum(axis=1).astype(dtype)


def moe_prefill(x: jax.Array, expert_ids: jax.Array, weights: jax.Array, gate: Any, up: Any, down: Any,
                hidden_act: str = "silu") -> jax.Array:
    """sum_j weights[t, j] * down(act(gate(x_t)) * up(x_t)) over expert expert_ids[t, j] -> [T, embed]."""
    k = expert_ids.shape[1]
    order, sizes = sort_by_expert(expert_ids, gate.shape[0])
    out = grouped_mlp(jnp.take(x, order // k, axis=0), sizes, gate, up, down, hidden_act)
    return combine(out, order, weights, x.dtype)
