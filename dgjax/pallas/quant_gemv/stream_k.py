"""Stream-K launch of the quantized GEMV: a fixed number of programs share the weight's K steps evenly.

Why: the grid launch (kernel.py) gives every (column block, K split) program the same work, so a grid that is
not a multiple of the SMs runs a tail: llama-3.1-8b's bf12 gate/up has 224 programs of 16 K steps on 132 SMs
(92 SMs run two, 40 run one), glm-4.5-air's fp8 q/k/v 448 of 8 steps. Here the column blocks' K steps are laid
end to end (block 0's steps, then block 1's, ...) and program p takes steps [p W / P, (p + 1) W / P) of the
W = blocks x steps, so every program streams the same bytes (+-1 step), and P is chosen as a multiple of the SMs.

A program's range crosses column blocks: it walks each block it touches (one K loop per block, pipelined like
the grid kernel's) and stores that block's partial sum into the block's slot for it: slot = p - (the first
program touching the block). The output is float32 partials [slots, rows, N] (a `SplitSums` like split-K's);
`slots` is the most programs any block has (2-3 at the launches used), and the block's first program zeroes
the slots that no program fills, so every slot is written. The block's first program also adds the bf12
escapes (they must be added once per block). Numerics: the grid kernel's per-step products, summed in another
grouping over K.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas import bf12_tiles
from dgjax.pallas.launch import Launch, whole
from dgjax.pallas.moe_decode import tiles
from dgjax.pallas.moe_decode.tiles import Operand


def first_program(step, work: int, programs: int):
    """The program whose range holds flattened K step `step` (int or traced int32): the largest p with
    p * work // programs <= step."""
    return ((step + 1) * programs - 1) // work


def slots_needed(blocks: int, k_steps: int, programs: int) -> int:
    """The most programs whose ranges touch one column block (each needs its own partial-sum slot)."""
    work = blocks * k_steps
    return max(first_program((j + 1) * k_steps - 1, work, programs) - first_program(j * k_steps, work, programs) + 1
               for j in range(blocks))


def supports(op: Operand, launch: Launch) -> bool:
    """Whether `launch.programs` programs can share this weight's steps (each at least one step)."""
    if op.k % launch.block_k or op.n % launch.block_n:
        return False
    return 1 <= launch.programs <= (op.n // launch.block_n) * (op.k // launch.block_k)


def _kernel(x_ref, *refs, op: Operand, rows: int, launch: Launch, slots: int):
    w_refs, o_ref = refs[:-1], refs[-1]
    bk, bn, programs = launch.block_k, launch.block_n, launch.programs
    k_steps = op.k // bk
    work = (op.n // bn) * k_steps
    p = pl.program_id(0)
    start, end = p * work // programs, (p + 1) * work // programs
    r = lax.broadcasted_iota(jnp.int32, (tiles.MIN_DOT, 1), 0)
    c = lax.broadcasted_iota(jnp.int32, (1, bn), 1)
    row_ok = jnp.broadcast_to(r < rows, (tiles.MIN_DOT, bn))

    def block(j, carry):
        lo = jnp.maximum(start - j * k_steps, 0)
        hi = jnp.minimum(end - j * k_steps, k_steps)
        n0 = j * bn

        def step(k0, acc):
            xs = tiles.x_tiles(x_ref, rows, k0, bk, op)
            return acc + tiles.tile_dot(xs, w_refs, op, 0, k0, n0, bk, bn)

        acc = tiles.k_loop(step, tiles.acc_zeros(op, x_ref.dtype, bn), k_steps=k_steps, base=lo * bk, block_k=bk,
                           unroll=launch.unroll, steps=hi - lo)
        acc = tiles.acc_rows(op, x_ref.dtype, acc)
        owner = lo == 0  # this program holds the block's first step
        if op.fmt == "bf12":
            acc = bf12_tiles.finish(acc, w_refs, x_ref, op.n, op.slots, 0, n0, bn, rows, owner)
        first = first_program(j * k_steps, work, programs)
        filled = first_program((j + 1) * k_steps - 1, work, programs) - first + 1
        plgpu.store(o_ref.at[p - first + 0 * r, r, n0 + c], acc, mask=row_ok)
        for s in range(1, slots):  # slots no program of this block fills: zeroed by its owner
            plgpu.store(o_ref.at[s + 0 * r, r, n0 + c], jnp.zeros_like(acc), mask=row_ok & owner & (s >= filled))
        return carry

    lax.fori_loop(start // k_steps, (end - 1) // k_steps + 1, block, jnp.int32(0))


@functools.partial(jax.jit, static_argnames=("op", "launch", "interpret"))
def stream_gemv(x: jax.Array, arrays: tuple, *, op: Operand, launch: Launch, interpret: bool = False) -> Any:
    """x [rows, K] . the weight `arrays` describe (tiles.operand of the one-expert stack) -> float32 partials
    [slots, rows, N] whose sum over the first axis is the product."""
    if not supports(op, launch):
        raise ValueError(f"{launch} cannot stream a [{op.k}, {op.n}] {op.fmt} weight")
    rows = x.shape[0]
    slots = slots_needed(op.n // launch.block_n, op.k // launch.block_k, launch.programs)
    out_shape = jax.ShapeDtypeStruct((slots, rows, op.n), jnp.float32)
    return pl.pallas_call(
        functools.partial(_kernel, op=op, rows=rows, launch=launch, slots=slots),
        grid=(launch.programs,),
        in_specs=[whole(x.shape)] + [whole(a.shape) for a in arrays],
        out_specs=whole(out_shape.shape),
        out_shape=out_shape,
        compiler_params=plgpu.CompilerParams(num_warps=launch.num_warps, num_stages=launch.num_stages),
        interpret=interpret,
        name=f"quant_gemv_stream_{op.fmt}_r{rows}_{launch.tag()}",
    )(x, *arrays)
