"""Skinny matmul (1-16 rows) streaming an input-major bf16 weight [K, N], optionally normalizing x first.

Why a kernel: decode reads every weight once per step. XLA's GEMV under-fills the H200 for projections
with few 128-column blocks (qwen3-30b-a3b's fused qkv [2048, 5120]: 40 blocks for 132 SMs, 15.6 µs vs
11.8 µs here in benchmarks/gemv_kernel_sweep.py), and the RMSNorm before a projection costs a launch of
its own (~1.8 µs per layer in the device trace). Here the norm runs in the GEMV's prologue: x is a few
rows, so every program re-reads it from L2 and computes the row scale itself.

Shape of the work:
- One program per (BN-column block, K split). A program loops over its K range BK rows at a time and
  accumulates x[:, k] . w[k, n] in float32 with Triton's `dot` (x padded to 16 rows by masked loads:
  `dot` needs M >= 16; the padding costs tensor-core time only).
- Split-K (`splits` > 1) gives projections with few column blocks enough programs to keep every SM
  streaming; each split writes float32 partial sums that the caller's epilogue (a residual add, say) sums.
- With `norm` [K]: a first loop over all of K sums x*x per row (float32), then each x block is scaled by
  rsqrt(mean + eps) * norm and rounded to x's dtype before the dot: `ref.gemv`'s rms_norm, bit for bit up
  to the order of the sum of squares.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas.launch import Launch

MIN_DOT_ROWS = 16
MAX_ROWS = 16


def _gemv_kernel(x_ref, w_ref, *refs, rows: int, k: int, block_k: int, k_steps: int, k_per_split: int,
                 normed: bool, eps: float):
    norm_ref, o_ref = refs if normed else (None, refs[0])
    s = pl.program_id(1)
    mp = max(MIN_DOT_ROWS, pl.next_power_of_2(rows))
    r = lax.broadcasted_iota(jnp.int32, (mp, 1), 0)
    c = lax.broadcasted_iota(jnp.int32, (1, block_k), 1)
    row_ok = jnp.broadcast_to(r < rows, (mp, block_k))
    r = jnp.minimum(r, rows - 1)
    load_x = lambda k0: plgpu.load(x_ref.at[r, k0 + c], mask=row_ok, other=0)  # noqa: E731

    scale = None
    if normed:
        def squares(i, acc):
            xf = load_x(i * block_k).astype(jnp.float32)
            return acc + jnp.sum(xf * xf, axis=1, keepdims=True)

        total = lax.fori_loop(0, k // block_k, squares, jnp.zeros((mp, 1), jnp.float32))
        scale = lax.rsqrt(total / k + eps)

    def body(i, acc):
        k0 = s * k_per_split + i * block_k
        xk = load_x(k0)
        if normed:
            nk = norm_ref[pl.ds(k0, block_k)].astype(jnp.float32)
            xk = (xk.astype(jnp.float32) * scale * nk[None, :]).astype(x_ref.dtype)
        wk = w_ref[pl.ds(i * block_k, block_k), :]
        return acc + plgpu.dot(xk, wk)

    bn = o_ref.shape[-1]
    acc = lax.fori_loop(0, k_steps, body, jnp.zeros((mp, bn), jnp.float32))
    o_ref[...] = acc.astype(o_ref.dtype)


def supports(rows: int, k: int, n: int, launch: Launch) -> bool:
    return 1 <= rows <= MAX_ROWS and k % (launch.splits * launch.block_k) == 0 and n % launch.block_n == 0


@functools.partial(jax.jit, static_argnames=("launch", "eps", "interpret"))
def gemv(x: jax.Array, w: jax.Array, norm: jax.Array | None = None, *, launch: Launch, eps: float = 1e-6,
         interpret: bool = False) -> jax.Array:
    """x [M, K] (. rms_norm(x, norm) if norm is given) . w [K, N], M <= 16 rows.

    Returns float32 [splits, M, N]: partial sums over the K splits (the caller sums them).
    """
    m, k = x.shape
    k2, n = w.shape
    if k != k2:
        raise ValueError(f"x {x.shape} and w {w.shape} do not contract")
    if not supports(m, k, n, launch):
        raise ValueError(f"gemv cannot run M={m} K={k} N={n} with {launch}")
    splits, bk, bn = launch.splits, launch.block_k, launch.block_n
    k_per_split = k // splits
    normed = norm is not None
    kernel = functools.partial(_gemv_kernel, rows=m, k=k, block_k=bk, k_steps=k_per_split // bk,
                               k_per_split=k_per_split, normed=normed, eps=eps)
    mp = max(MIN_DOT_ROWS, pl.next_power_of_2(m))
    in_specs = [pl.BlockSpec((m, k), lambda j, s: (0, 0)), pl.BlockSpec((k_per_split, bn), lambda j, s: (s, j))]
    args = [x, w]
    if normed:
        in_specs.append(pl.BlockSpec((k,), lambda j, s: (0,)))
        args.append(norm)
    out = pl.pallas_call(
        kernel,
        grid=(n // bn, splits),
        in_specs=in_specs,
        out_specs=pl.BlockSpec((None, mp, bn), lambda j, s: (s, 0, j)),
        out_shape=jax.ShapeDtypeStruct((splits, mp, n), jnp.float32),
        compiler_params=plgpu.CompilerParams(num_warps=launch.num_warps, num_stages=launch.num_stages),
        interpret=interpret,
        name=f"gemv{'_rmsnorm' if normed else ''}_bn{bn}_bk{bk}_s{splits}",
    )(*args)
    return out[:, :m]
