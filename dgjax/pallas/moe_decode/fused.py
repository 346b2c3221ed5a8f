"""Routed experts for 1-16 decode tokens as ONE Pallas kernel: gate/up, activation and down per ffw block.

Why: the two-stage kernel (kernel.py) runs four launches per MoE layer at one stream on fp8 experts (gate/up,
the XLA fusion that finishes its split partials, down, the final sum), and its down stage streams a
12.6 MB qwen3-30b-a3b expert set at ~30% of the read ceiling. Here a program owns one block of
`block_f` ffw columns of one routed expert:
1. It streams that block's gate and up columns over all of the embedding, as the gate/up stage does, but
   unsplit.
2. It applies the activation in registers and rounds h to x's dtype (the reference's rounding point).
3. It multiplies h by the down weight's rows for those ffw columns, `block_n` outputs at a time, and stores
   each [T, block_n] piece, scaled by the routing weight, into its own float32 partial.
The partials [ffw blocks, slots, T, embed] are summed by XLA: in the deviceless compile of qwen3-30b-a3b fp8
(benchmarks/deviceless_hlo.py) a layer's experts take the kernel, a reduce and the residual add, three
launches instead of four, and h never goes through memory.
Down's weight is read as [block_n, block_f] tiles: rows of block_f contiguous inputs, which for 64 fp8
columns is 64 bytes, two DRAM sectors.
Slots and the dedupe are the two-stage kernel's (first slot of an expert computes, the others store zeros).
Formats: every non-packed one tiles.py reads (plain, FP8 blocks, int8 groups); packed nibbles need h's
even and odd columns apart, which registers do not give, so they stay on the two-stage kernel.
Off by default (DGJAX_MOE_FUSE=expert): on the H200 (s10c, benchmarks/results/2026-12-02-session10-summary.md)
its programs, one per ffw block, stream too few bytes each: qwen3-30b-a3b experts 34.6-37.2 µs against
23.3 two-stage, engine C1 fp8 295.8 vs 330.3 tok/s (glm-4.5-air 127.4 vs 164.6).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas.launch import Launch, whole
from dgjax.pallas.moe_decode import tiles
from dgjax.pallas.moe_decode.kernel import MIN_DOT_ROWS, row_weights, silu_mul, slot_expert
from dgjax.pallas.moe_decode.kernel import supports as kernel_supports
from dgjax.pallas.moe_decode.tiles import Operand, describe, operand, valid_block_k, valid_block_n

BLOCK_F = 64  # ffw columns per program: qwen3-30b-a3b 12 blocks x 8 experts, glm-4.5-air 22 x 8
BLOCK_N = 128  # down outputs per store (one fp8 scale block)
BLOCK_K = 128  # embedding inputs per gate/up step


def launch_for(g: Operand, d: Operand, block_f: int = BLOCK_F) -> tuple[int, int, int] | None:
    """(block_f, block_n, block_k) that tile these weights (halving `block_f` and the defaults as needed), or
    None."""
    def first(ok, start):
        b = start
        while b >= tiles.MIN_DOT and not ok(b):
            b //= 2
        return b if b >= tiles.MIN_DOT else None
    bf = first(lambda b: valid_block_n(g, b) and valid_block_k(d, b), block_f)
    bn = first(lambda b: valid_block_n(d, b), BLOCK_N)
    bk = first(lambda b: valid_block_k(g, b), BLOCK_K)
    return None if None in (bf, bn, bk) else (bf, bn, bk)


def supports(tokens: int, gate: Any, up: Any, down: Any, hidden_act: str) -> bool:
    """The two-stage kernel's cases (kernel.supports), less packed formats, where `launch_for` finds blocks."""
    if not kernel_supports(tokens, gate, up, down, hidden_act):
        return False
    g, d = describe(gate), describe(down)
    return not (g.packed or d.packed) and launch_for(g, d) is not None


def _store_cols(o_ref, value, tokens: int, n0):
    """o[:tokens, n0:n0 + cols] = the first `tokens` rows of a [16, cols] value (padding rows masked)."""
    r = lax.broadcasted_iota(jnp.int32, (MIN_DOT_ROWS, 1), 0)
    c = n0 + lax.broadcasted_iota(jnp.int32, (1, value.shape[1]), 1)
    plgpu.store(o_ref.at[r, c], value, mask=jnp.broadcast_to(r < tokens, value.shape))


def _fused_kernel(ids_ref, wts_ref, x_ref, *refs, g_op: Operand, d_op: Operand, tokens: int, top_k: int,
                  num_slots: int, bf: int, bn: int, bk: int):
    n_g, n_d = g_op.num_arrays, d_op.num_arrays
    g_refs, u_refs, d_refs, o_ref = refs[:n_g], refs[n_g:2 * n_g], refs[2 * n_g:2 * n_g + n_d], refs[-1]
    a, j = pl.program_id(0), pl.program_id(1)
    dtype = x_ref.dtype
    expert, live = slot_expert(ids_ref, a, num_slots)
    f0 = j * bf

    def step(k0, carry):
        xs = tiles.x_tiles(x_ref, tokens, k0, bk, g_op)
        return (carry[0] + tiles.tile_dot(xs, g_refs, g_op, expert, k0, f0, bk, bf),
                carry[1] + tiles.tile_dot(xs, u_refs, g_op, expert, k0, f0, bk, bf))

    zeros = tiles.acc_zeros(g_op, dtype, bf)
    acc_g, acc_u = (tiles.acc_rows(g_op, dtype, acc) for acc in
                    tiles.k_loop(step, (zeros, zeros), k_steps=g_op.k // bk, base=0, block_k=bk, unroll=1, live=live))
    h = silu_mul(acc_g, acc_u).astype(dtype)  # [16, bf], rounded where the reference rounds
    hs = tiles.row_tiles(h, d_op)
    rw = row_weights(ids_ref, wts_ref, expert, tokens, top_k)[:, None]

    def down_block(i, carry):
        n0 = i * bn
        out = tiles.acc_rows(d_op, dtype, tiles.tile_dot(hs, d_refs, d_op, expert, f0, n0, bf, bn))
        # where, not a product: a token that did not pick this expert adds exactly 0, even if its row overflowed
        _store_cols(o_ref, jnp.where(rw != 0.0, out * rw, 0.0), tokens, n0)
        return carry

    def zero_block(i, carry):  # a slot that repeats an expert: zeros, no weight read
        _store_cols(o_ref, jnp.zeros((MIN_DOT_ROWS, bn), jnp.float32), tokens, i * bn)
        return carry

    blocks = d_op.n // bn
    lax.fori_loop(jnp.int32(0), tiles.trips(live, blocks), down_block, 0)
    lax.fori_loop(jnp.int32(0), tiles.trips(jnp.logical_not(live), blocks), zero_block, 0)


@functools.partial(jax.jit, static_argnames=("hidden_act", "block_f", "num_warps", "num_stages", "interpret"))
def expert_partials(x, expert_ids, weights, gate, up, down, *, hidden_act: str = "silu", block_f: int = BLOCK_F,
                    num_warps: int = 4, num_stages: int = 3, interpret: bool = False) -> jax.Array:
    """float32 [ffw blocks, T * top_k, T, embed] whose sum over the first two axes is the output (`block_f`,
    `num_warps`, `num_stages`: launch knobs for sweeps)."""
    t, k = expert_ids.shape
    if not supports(t, gate, up, down, hidden_act):
        raise ValueError(f"the fused MoE decode kernel does not support T={t}, {hidden_act!r} or these weights")
    (g_op, g_arrays), (_, u_arrays), (d_op, d_arrays) = operand(gate), operand(up), operand(down)
    bf, bn, bk = launch_for(g_op, d_op, block_f)
    ids_flat = expert_ids.reshape(t * k).astype(jnp.int32)
    wts_flat = weights.reshape(t * k).astype(jnp.float32)
    a, blocks = t * k, g_op.n // bf
    kernel = functools.partial(_fused_kernel, g_op=g_op, d_op=d_op, tokens=t, top_k=k, num_slots=a, bf=bf, bn=bn,
                               bk=bk)
    arrays = list(g_arrays) + list(u_arrays) + list(d_arrays)
    tag = Launch(bf, bk, 1, num_warps, num_stages).tag()
    return pl.pallas_call(
        kernel,
        grid=(a, blocks),
        in_specs=[whole(ids_flat.shape), whole(wts_flat.shape), whole(x.shape)] + [whole(w.shape) for w in arrays],
        out_specs=pl.BlockSpec((None, None, t, d_op.n), lambda i, jj: (jj, i, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((blocks, a, t, d_op.n), jnp.float32),
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=interpret,
        name=f"moe_fused_{g_op.fmt}_t{t}_{tag}_dn{bn}",
    )(ids_flat, wts_flat, x, *arrays)


@functools.partial(jax.jit, static_argnames=("hidden_act", "block_f", "num_warps", "num_stages", "interpret"))
def moe_decode(x, expert_ids, weights, gate, up, down, *, hidden_act: str = "silu", block_f: int = BLOCK_F,
               num_warps: int = 4, num_stages: int = 3, interpret: bool = False):
    """ref.moe_decode's result [T, embed] in x's dtype, each routed expert read once, in one kernel."""
    parts = expert_partials(x, expert_ids, weights, gate, up, down, hidden_act=hidden_act, block_f=block_f,
                            num_warps=num_warps, num_stages=num_stages, interpret=interpret)
    return parts.sum(axis=(0, 1)).astype(x.dtype)
