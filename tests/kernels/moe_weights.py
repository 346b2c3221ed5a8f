"""Tiny expert weights for the MoE decode kernel tests: dense float32 stacks, their quantized nodes (numpy
encoders), NaN-poisoned experts (a kernel that reads an unrouted expert returns NaN), routings, and the
tolerance check against ref.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import ml_dtypes

from dgjax.quant import Fp8BlockWeight, IntWeight, Mxfp4Weight, Nvfp4Weight, bf12, fp8_block, int_group, mxfp4, nvfp4

E, H, F = 8, 64, 32
FP8_BLOCK = (16, 32)  # several scale blocks per tiny expert: a column block straddles two of them


def _np_moe(x, ids, weights, gate, up, down):
    """float64 loop over tokens and their experts, dense [E, in, out] weights."""
    silu = lambda v: v / (1.0 + np.exp(-v))  # noqa: E731
    x = np.asarray(x, np.float64)
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        for j, e in enumerate(ids[t]):
            h = silu(x[t] @ gate[e]) * (x[t] @ up[e])
            out[t] += weights[t, j] * (h @ down[e])
    return out


def _dense(rng, poisoned=()):
    w = lambda *s: (0.15 * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
    gate, up, down = w(E, H, F), w(E, H, F), w(E, F, H)
    for a in (gate, up, down):
        a[list(poisoned)] = np.nan
    return gate, up, down


def _fp8(w: np.ndarray, block=FP8_BLOCK) -> Fp8BlockWeight:
    """Dense [E, in, out] -> an fp8 node over its [E, out, in] rows (NaN experts get NaN values and scales)."""
    values, scale = fp8_block.quantize_np(np.swapaxes(w, 1, 2), block)
    return Fp8BlockWeight(weight=jnp.asarray(values), scale=jnp.asarray(scale), shape=w.shape, in_dims=1,
                          expert_dims=1, block=block)


def _fp8_dense(node: Fp8BlockWeight) -> np.ndarray:
    rows = fp8_block.dequantize_np(np.asarray(node.weight), np.asarray(node.scale), node.block)
    return np.swapaxes(rows, 1, 2)


INT4_GROUP, INT8_GROUP = 16, 32  # int4: two scale groups per 32-input K step


def _node(fmt: str, w: np.ndarray):
    """Dense [E, in, out] float32 -> a quantized node in `fmt` over its [E, out, in] rows (numpy encoders)."""
    rows = np.swapaxes(w, 1, 2)
    geo = dict(shape=w.shape, in_dims=1, expert_dims=1)
    if fmt == "fp8":
        return _fp8(w)
    if fmt == "nvfp4":
        packed, block_scale, global_scale = nvfp4.quantize_np(rows)
        return Nvfp4Weight(packed=jnp.asarray(packed), block_scale=jnp.asarray(block_scale),
                           global_scale=jnp.asarray(global_scale), **geo)
    if fmt == "mxfp4":
        packed, scale = mxfp4.quantize_np(rows)
        return Mxfp4Weight(packed=jnp.asarray(packed), scale=jnp.asarray(scale), **geo)
    if fmt == "bf12":  # the rows rounded to bf16, with values below their row's window: escapes
        rows = np.array(rows, np.float32)
        rows[:, ::5, 3::11] = np.where(np.isnan(rows[:, ::5, 3::11]), np.nan, 1e-20)
        return bf12.node_from(jnp.asarray(rows.astype(ml_dtypes.bfloat16)), **geo)
    bits, group, symmetric = (4, INT4_GROUP, False) if fmt == "int4" else (8, INT8_GROUP, True)
    q, scale, zero = int_group.quantize_np(rows, bits, group, symmetric)
    return IntWeight(values=jnp.asarray(int_group.values_from_q_np(q, bits)), scale=jnp.asarray(scale),
                     zero_point=None if zero is None else jnp.asarray(zero), bits=bits, group_size=group, **geo)


def _poison(node, experts):
    """The node with NaN (or the format's NaN code) in the scales of `experts`: reading them shows."""
    if isinstance(node, Nvfp4Weight):
        return node.replace(global_scale=node.global_scale.at[experts].set(jnp.nan))
    if isinstance(node, Mxfp4Weight):
        return node.replace(scale=node.scale.at[experts].set(255))
    if isinstance(node, bf12.Bf12Weight):
        return node.replace(row_scale=node.row_scale.at[experts].set(jnp.nan))
    return node.replace(scale=node.scale.at[experts].set(jnp.nan))


def _routing(rng, tokens, top_k, experts=range(E)):
    experts = np.asarray(list(experts))
    ids = np.stack([rng.choice(experts, top_k, replace=False) for _ in range(tokens)]).astype(np.int32)
    weights = rng.uniform(0.1, 1.0, (tokens, top_k)).astype(np.float32)
    return ids, weights


def _check(got, want, dtype, bf16_atol: float = 1e-2, unread: str = "an unrouted expert"):
    """got == want to float32 rounding (2e-5 of the largest value) or, for 16-bit x, to `bf16_atol` of it; NaN
    anywhere means a poisoned weight (`unread`) or an unwritten output was read."""
    got = np.asarray(jnp.asarray(got, jnp.float32))
    want = np.asarray(jnp.asarray(want, jnp.float32))
    assert np.isfinite(got).all(), f"a NaN weight of {unread} (or an unwritten output) was read"
    if dtype == jnp.float32:
        np.testing.assert_allclose(got, want, atol=2e-5 * max(1.0, np.abs(want).max()), rtol=0)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=bf16_atol * np.abs(want).max())


def _abstract_node(fmt: str, experts: int, k: int, n: int):
    """A weight node of shapes only ([E, k, n] dense), for lowering without data."""
    spec = jax.ShapeDtypeStruct
    geo = dict(shape=(experts, k, n), in_dims=1, expert_dims=1)
    if fmt == "plain":
        return spec((experts, k, n), jnp.bfloat16)
    if fmt == "fp8":
        return Fp8BlockWeight(weight=spec((experts, n, k), jnp.float8_e4m3fn),
                              scale=spec((experts, n // 128, k // 128), jnp.float32), **geo)
    if fmt == "nvfp4":
        return Nvfp4Weight(packed=spec((experts, n, k // 2), jnp.uint8),
                           block_scale=spec((experts, n, k // 16), jnp.float8_e4m3fn),
                           global_scale=spec((experts,), jnp.float32), **geo)
    if fmt == "mxfp4":
        return Mxfp4Weight(packed=spec((experts, n, k // 2), jnp.uint8), scale=spec((experts, n, k // 32), jnp.uint8),
                           **geo)
    if fmt == "bf12":
        return bf12.Bf12Weight(low=spec((experts, n, k // 2), jnp.uint16), codes=spec((experts, n, k // 2), jnp.uint8),
                               row_scale=spec((experts, n), jnp.float32), escape_cols=spec((experts, n, 16), jnp.uint16),
                               escape_bits=spec((experts, n, 16), jnp.uint16), **geo)
    bits, group = (4, 128) if fmt == "int4" else (8, 64)
    values = spec((experts, n, k // 2), jnp.uint8) if bits == 4 else spec((experts, n, k), jnp.int8)
    zero = spec((experts, n, k // group), jnp.int8) if bits == 4 else None
    return IntWeight(values=values, scale=spec((experts, n, k // group), jnp.bfloat16), zero_point=zero, bits=bits,
                     group_size=group, **geo)


def bf12_escape_experts(rng):
    """(gate, up, down) bf12 expert stacks whose products are escapes only, and their dense [E, in, out] float64:
    every weight row has an outlier 2**20 at input 0 (the row's window then starts at 2**6) and values ~1 below
    that window (escapes: exact values from the table); up's output 0 is all zeros. With x[:, 0] = 0 (so
    h[:, 0] = 0 too) both stages' results are their escapes alone."""
    def stack(k, n, live):
        rows = np.zeros((E, n, k), np.float32)
        rows[:, :, 0] = 2.0**20
        for e in range(E):
            for r in range(n):
                rows[e, r, rng.choice(np.arange(1, k), live, replace=False)] = rng.standard_normal(live)
        return rows

    gate_rows, up_rows, down_rows = stack(H, F, 40), stack(H, F, 40), stack(F, H, 20)
    up_rows[:, 0, :] = 0.0
    nodes = [bf12.node_from(jnp.asarray(r).astype(jnp.bfloat16), (E, r.shape[2], r.shape[1]), 1, 1)
             for r in (gate_rows, up_rows, down_rows)]
    assert all(int(np.count_nonzero(np.asarray(n.escape_bits))) >= 20 * E * F for n in nodes)
    return nodes, [np.swapaxes(np.asarray(n.rows(), np.float64), 1, 2) for n in nodes]
