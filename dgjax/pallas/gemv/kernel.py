"""Skinny matmul (1-16 rows) that streams an input-major bf16 weight [K, N] at full HBM bandwidth.

Why a kernel: decode reads every weight once per step, so each projection should run at the read
ceiling, and the small elementwise ops around the projections (RMSNorm before, residual add or SwiGLU
after) cost more as separate launches than their work is worth. This kernel is the plain GEMV that
the fused variants build on.

Shape of the work:
- One program per (BN-column block, K split). A program loops over its K range BK rows at a time and
  accumulates x[:, k] . w[k, n] in float32 with Triton's `dot` (x padded to 16 rows by masked loads:
  `dot` needs M >= 16; the padding costs tensor-core time only).
- Split-K (`splits` > 1) gives projections with few column blocks (e.g. a [14336, 4096] down
  projection) enough programs to keep every SM streaming; each split writes float32 partial sums
  that a small reduction adds up.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

MIN_DOT_ROWS = 16


def _gemv_kernel(x_ref, w_ref, o_ref, *, rows: int, block_k: int, k_steps: int, k_per_split: int):
    s = pl.program_id(1)
    mp = max(MIN_DOT_ROWS, pl.next_power_of_2(rows))
    r = lax.broadcasted_iota(jnp.int32, (mp, 1), 0)
    c = lax.broadcasted_iota(jnp.int32, (1, block_k), 1)
    row_ok = jnp.broadcast_to(r < rows, (mp, block_k))
    r = jnp.minimum(r, rows - 1)
    base = s * k_per_split

    def body(i, acc):
        k0 = base + i * block_k
        xk = plgpu.load(x_ref.at[r, k0 + c], mask=row_ok, other=0)
        wk = w_ref[pl.ds(i * block_k, block_k), :]
        return acc + plgpu.dot(xk, wk)

    bn = o_ref.shape[-1]
    acc = lax.fori_loop(0, k_steps, body, jnp.zeros((mp, bn), jnp.float32))
    o_ref[...] = acc.astype(o_ref.dtype)


@functools.partial(
    jax.jit, static_argnames=("block_n", "block_k", "splits", "num_warps", "num_stages", "interpret")
)
def gemv(
    x: jax.Array,
    w: jax.Array,
    *,
    block_n: int = 64,
    block_k: int = 256,
    splits: int = 1,
    num_warps: int = 4,
    num_stages: int = 3,
    interpret: bool = False,
) -> jax.Array:
    """x [M, K] . w [K, N] -> [M, N] in x's dtype (float32 accumulation), M <= 16 rows."""
    m, k = x.shape
    k2, n = w.shape
    if k != k2:
        raise ValueError(f"x {x.shape} and w {w.shape} do not contract")
    if k % (splits * block_k) or n % block_n:
        raise ValueError(f"K={k} must be a multiple of splits*block_k={splits * block_k}, N={n} of block_n={block_n}")
    k_per_split = k // splits
    kernel = functools.partial(
        _gemv_kernel, rows=m, block_k=block_k, k_steps=k_per_split // block_k, k_per_split=k_per_split
    )
    out_dtype = x.dtype if splits == 1 else jnp.float32
    mp = max(MIN_DOT_ROWS, pl.next_power_of_2(m))
    out = pl.pallas_call(
        kernel,
        grid=(n // block_n, splits),
        in_specs=[
            pl.BlockSpec((m, k), lambda j, s: (0, 0)),
            pl.BlockSpec((k_per_split, block_n), lambda j, s: (s, j)),
        ],
        out_specs=pl.BlockSpec((None, mp, block_n), lambda j, s: (s, 0, j)),
        out_shape=jax.ShapeDtypeStruct((splits, mp, n), out_dtype),
        compiler_params=plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=interpret,
        name=f"gemv_bn{block_n}_bk{block_k}_s{splits}",
    )(x, w)
    if splits == 1:
        return out[0, :m]
    return jnp.sum(out[:, :m], axis=0).astype(x.dtype)
