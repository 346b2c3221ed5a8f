"""Fuse sibling projections once after loading, so each runs as one GEMM per step.

Why: at decode a projection's time is its weight bytes over the HBM bandwidth plus a fixed start and
drain cost per GEMM, which small weights pay in full. On an H200 (benchmarks/gemv_kernel_sweep.py,
benchmarks/results/) XLA streamed llama-3.1-8b's gate and up [4096, 14336] at 3.44 TB/s each but the
two side by side as one [4096, 28672] weight at 4.03 TB/s; q, k, v behave the same way.

Layouts (what `blocks.attention` and `blocks.gated_mlp` read when the fused leaves are set):
- qkv [embed, kv_heads, group + 2, head_dim]: per KV head its `group` q heads (q head j*group + i is
  entry i of KV head j, transformers' GQA order), then its k, then its v. Sharding the kv_heads axis
  keeps each device's q heads next to their own k and v, so tensor parallelism needs no reshuffle.
- gate_up [embed, 2, ffw]: gate then up, sharded on ffw like the separate weights.
Quantized nodes (dgjax.quant) are joined the same way from their packed rows, bit for bit
(dgjax.quant.rows), on a single device and where every head (or the ffw dim) starts on the format's row
grid (fp8: head_dim a multiple of 128); NVFP4, whose per-tensor global scales differ, stays separate. So do
meshes that would split q heads differently from KV heads.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from dgjax.models import blocks
from dgjax.quant import is_quantized
from dgjax.quant.rows import concat_row_segments
from dgjax.sharding import ShardingRules, logical_to_sharding

QKV_AXES = ("embed", "kv_heads", None, "head_dim")
QKV_BIAS_AXES = ("kv_heads", None, "head_dim")
GATE_UP_AXES = ("embed", None, "ffw")
GATE_UP_BIAS_AXES = (None, "ffw")


def _plain(*xs: Any) -> bool:
    return all(isinstance(x, jax.Array) for x in xs)


def _kv_split_matches(kv_heads: int, mesh: Mesh, rules: ShardingRules) -> bool:
    """Whether the mesh splits KV heads exactly as it splits q heads (else fusing would move q heads)."""
    ways = math.prod(mesh.shape[a] for a in rules.mesh_axes("kv_heads"))
    heads_ways = math.prod(mesh.shape[a] for a in rules.mesh_axes("heads"))
    return ways == heads_ways and kv_heads % ways == 0


def _place(fn, args, shape, axes, mesh: Mesh, rules: ShardingRules) -> jax.Array:
    return jax.jit(fn, out_shardings=logical_to_sharding(mesh, rules, shape, axes))(*args)


def _stack_qkv(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """q [..., H, D], k/v [..., KVH, D] -> [..., KVH, H/KVH + 2, D]."""
    kvh, d = k.shape[-2], k.shape[-1]
    qg = q.reshape(q.shape[:-2] + (kvh, q.shape[-2] // kvh, d))
    return jnp.concatenate([qg, k[..., None, :], v[..., None, :]], axis=-2)


def _quantized_qkv(q: Any, k: Any, v: Any, shape: tuple[int, ...]) -> Any:
    """q [embed, H, D], k/v [embed, KVH, D] nodes -> one [embed, KVH, H/KVH + 2, D] node (or None)."""
    _, kvh, group_plus_2, d = shape
    g = group_plus_2 - 2
    segments = []
    for j in range(kvh):
        segments += [(0, j * g * d, g * d), (1, j * d, d), (2, j * d, d)]
    return concat_row_segments([q, k, v], segments, shape)


def _fusable_nodes(mesh: Mesh, *ws: Any) -> bool:
    """Quantized siblings are joined on a single device only (their per-array shardings differ)."""
    return mesh.size == 1 and all(is_quantized(w) for w in ws)


def fuse_attention(p: blocks.AttentionParams, mesh: Mesh, rules: ShardingRules) -> blocks.AttentionParams:
    if p.q is None or not _kv_split_matches(p.k.shape[1], mesh, rules):
        return p
    e, h, d = p.q.shape
    kvh = p.k.shape[1]
    shape = (e, kvh, h // kvh + 2, d)
    if _plain(p.q, p.k, p.v):
        qkv = _place(_stack_qkv, (p.q, p.k, p.v), shape, QKV_AXES, mesh, rules)
    elif _fusable_nodes(mesh, p.q, p.k, p.v):
        qkv = _quantized_qkv(p.q, p.k, p.v, shape)
        if qkv is None:
            return p
    else:
        return p
    bias = None
    if p.q_bias is not None:
        bias = _place(_stack_qkv, (p.q_bias, p.k_bias, p.v_bias), shape[1:], QKV_BIAS_AXES, mesh, rules)
    return p.replace(q=None, k=None, v=None, q_bias=None, k_bias=None, v_bias=None, qkv=qkv, qkv_bias=bias)


def fuse_mlp(p: blocks.MLPParams, mesh: Mesh, rules: ShardingRules) -> blocks.MLPParams:
    if p.gate is None:
        return p
    stack = lambda a, b: jnp.stack([a, b], axis=-2)  # noqa: E731
    e, f = p.gate.shape
    if _plain(p.gate, p.up):
        gate_up = _place(stack, (p.gate, p.up), (e, 2, f), GATE_UP_AXES, mesh, rules)
    elif _fusable_nodes(mesh, p.gate, p.up):
        gate_up = concat_row_segments([p.gate, p.up], [(0, 0, f), (1, 0, f)], (e, 2, f))
        if gate_up is None:
            return p
    else:
        return p
    bias = None
    if p.gate_bias is not None:
        bias = _place(stack, (p.gate_bias, p.up_bias), (2, f), GATE_UP_BIAS_AXES, mesh, rules)
    return p.replace(gate=None, up=None, gate_bias=None, up_bias=None, gate_up=gate_up, gate_up_bias=bias)


def fuse_projections(params: Any, mesh: Mesh, rules: ShardingRules) -> Any:
    """The same model with every fusable attention's q/k/v and MLP's gate/up fused (see module doc).

    Walks the whole pytree, so any family built from `blocks` gets it; the separate weights are freed
    as soon as the caller drops `params`.
    """
    node_types = (blocks.AttentionParams, blocks.MLPParams)

    def fuse(node: Any) -> Any:
        if isinstance(node, blocks.AttentionParams):
            return fuse_attention(node, mesh, rules)
        if isinstance(node, blocks.MLPParams):
            return fuse_mlp(node, mesh, rules)
        return node

    return jax.tree_util.tree_map(fuse, params, is_leaf=lambda n: isinstance(n, node_types))
