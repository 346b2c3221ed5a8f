"""Merge of split-K decode attention partials (see ref.py) in one Pallas kernel with the Triton lowering.

Why: in jnp, XLA compiles the merge into three launch-bound kernels per layer on an H200 (weights; denominator;
numerator, divide, slice and cast: ~1.3-1.6 us each). Here one program per (row, kv head, D block):
- loads the [S, G] running maxima and sums as tiles (S padded to a power of two by masked loads) and
  computes each split's weight exp2(m - max m);
- loads the [S, G, block_d] accumulators as one tile (only the group's real rows of the padded [GP, D];
  G rounded up to a power of two, for Triton's block shapes) and reduces over the splits;
- divides and stores in the output dtype.
The sums' order may differ from XLA's: the result matches ref.py to float32 rounding.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas import pdl
from dgjax.pallas.carrier import f16_carrier


def supports(head_dim: int) -> bool:
    """Whether the kernel handles this head_dim (Triton tiles are powers of two)."""
    return head_dim > 0 and head_dim & (head_dim - 1) == 0


def _merge_kernel(acc_ref, m_ref, l_ref, o_ref, *, splits: int, rows: int, group: int, kv_heads: int, bd: int,
                  out_dtype, carry_f16: bool):
    sp = pl.next_power_of_2(splits)
    s = lax.broadcasted_iota(jnp.int32, (sp, rows), 0)
    r = lax.broadcasted_iota(jnp.int32, (sp, rows), 1)
    s_ok, s_in = s < splits, jnp.minimum(s, splits - 1)
    m = plgpu.load(m_ref.at[s_in, r], mask=s_ok, other=-jnp.inf)
    l = plgpu.load(l_ref.at[s_in, r], mask=s_ok, other=0.0)
    m_all = jnp.max(m, axis=0)
    m_all = jnp.where(jnp.abs(m_all) < jnp.inf, m_all, 0.0)  # no key in any split: keep exp2 finite
    w = jnp.where(l > 0.0, jnp.exp2(m - m_all[None, :]), 0.0)  # [S, rows]
    s3 = lax.broadcasted_iota(jnp.int32, (sp, rows, bd), 0)
    r3 = lax.broadcasted_iota(jnp.int32, (sp, rows, bd), 1)
    c3 = lax.broadcasted_iota(jnp.int32, (sp, rows, bd), 2)
    acc = plgpu.load(acc_ref.at[jnp.minimum(s3, splits - 1), r3, c3], mask=s3 < splits, other=0.0)
    num = jnp.sum(acc * w[:, :, None], axis=0)
    den = jnp.sum(l * w, axis=0)
    out = (num / jnp.where(den == 0.0, 1.0, den)[:, None]).astype(out_dtype)
    out = pdl.trigger_after(f16_carrier(out) if carry_f16 else out)
    # only the group's real rows: o is [B * KVH * group, D], so a group that is not a power of two needs no
    # slice (a copy kernel) after the merge. Padding rows are masked, not clamped (see moe_decode.tiles.store_rows).
    r2 = lax.broadcasted_iota(jnp.int32, (rows, bd), 0)
    c2 = pl.program_id(2) * bd + lax.broadcasted_iota(jnp.int32, (rows, bd), 1)
    first = (pl.program_id(0) * kv_heads + pl.program_id(1)) * group
    plgpu.store(o_ref.at[first + r2, c2], out, mask=r2 < group)


TILE_ELEMENTS = 4096  # float32 partials one program loads at once: 32 registers a thread at 4 warps


def default_block_d(splits: int, rows: int, d: int) -> int:
    """D columns per program: all splits of the group's rows load as one [S, rows, block_d] tile (one memory
    latency, not S of them) of about TILE_ELEMENTS, which also spreads batch 1 over more programs."""
    bd = d
    while bd > 16 and pl.next_power_of_2(splits) * rows * bd > TILE_ELEMENTS:
        bd //= 2
    return bd


@functools.partial(
    jax.jit, static_argnames=("group", "out_dtype", "block_d", "num_warps", "num_stages", "carry_f16", "interpret"),
)
def merge_splits(
    acc: jax.Array, m: jax.Array, l: jax.Array, *, group: int, out_dtype, block_d: int | None = None,
    num_warps: int = 4, num_stages: int = 2, carry_f16: bool = False, interpret: bool = False,
) -> jax.Array:
    """ref.merge_splits in one kernel: acc float32 [B, KVH, S, GP, D], m, l float32 [B, KVH, S, GP]
    -> [B, KVH, group, D] in out_dtype (`carry_f16`: those values carried as float16, dgjax/pallas/carrier.py).
    `block_d`: D columns per program (default_block_d)."""
    b, kvh, splits, gp, d = acc.shape
    rows = pl.next_power_of_2(group)
    bd = block_d or default_block_d(splits, rows, d)
    if rows > gp or not supports(d) or d % bd:
        raise ValueError(f"the split merge kernel does not support group {group} of {gp}, D={d}, block_d={bd}")
    stat = pl.BlockSpec((None, None, splits, gp), lambda i, j, c: (i, j, 0, 0))
    out = pl.pallas_call(
        functools.partial(_merge_kernel, splits=splits, rows=rows, group=group, kv_heads=kvh, bd=bd,
                          out_dtype=jnp.dtype(out_dtype), carry_f16=carry_f16),
        grid=(b, kvh, d // bd),
        in_specs=[pl.BlockSpec((None, None, splits, gp, bd), lambda i, j, c: (i, j, 0, 0, c)), stat, stat],
        out_specs=pl.BlockSpec((b * kvh * group, d), lambda i, j, c: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((b * kvh * group, d), jnp.float16 if carry_f16 else out_dtype),
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=interpret,
        name=f"split_merge_s{splits}_g{gp}_d{d}",
    )(acc, m, l)
    return out.reshape(b, kvh, group, d)
