"""x [rows <= 16, K] . W^T for a bf16 (or bf12) weight W [N, K] as a Pallas Mosaic-GPU kernel: TMA streams the
weight tiles into shared memory and the warpgroup MMA reads them there (bf16) or from registers after the
tile decode (bf12), with x [16, K] as the MMA's (transposed) 16-column right-hand side.

Why (an experiment against the Pallas-Triton GEMV, dgjax/pallas/quant_gemv): that kernel streams llama's large
weights at ~3.2-3.3 TB/s where XLA's bf16 dot reaches ~4.3 (benchmarks/results/2026-12-04-s25-bf12.md), in
bf12 and fp8 alike, so the 25% fewer bytes of bf12 bought nothing. Triton's pointer loads go through registers
or cp.async, one 16-byte request per thread; TMA moves a whole [block_n, block_k] tile per instruction, which is
how Hopper kernels stream near the ceiling. The weight is the MMA's 64-row left operand (M = the weight's rows,
so no padding of the 1-16 x rows to 64), x [16, K] the right one (N = 16, read K-major).

Grid (column block of `block_n` weight rows, K split): each program pipelines its K range in `block_k` steps
(`stages` TMA copies in flight) and writes float32 partials [splits, N, 16]; the caller sums the splits and
keeps the real rows (api.py).
bf12 (dgjax/quant/bf12.py): the tile's byte pairs (uint16) and code pairs (uint8) arrive by TMA too; registers
rebuild the even and odd inputs as bf16 (exponent field = code) and two MMAs meet them with x's even and odd
columns times 2**X_SHIFT; the row scales and the escapes are the caller's epilogue (api.py).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

COLS = 16  # x rows padded to the MMA's N


@dataclasses.dataclass(frozen=True)
class Launch:
    block_n: int = 128  # weight rows a program (two 64-row MMAs)
    block_k: int = 64  # inputs a pipeline step (bf16: 128 bytes a row, one 128-byte swizzle)
    splits: int = 1
    stages: int = 4

    def tag(self) -> str:
        return f"bn{self.block_n}_bk{self.block_k}_s{self.splits}_st{self.stages}"


def _transforms(minor_elems: int, dtype) -> tuple:
    bits = jnp.dtype(dtype).itemsize * 8
    swizzle = plgpu.find_swizzle(minor_elems * bits)
    return (plgpu.TilingTransform((8, swizzle * 8 // bits)), plgpu.SwizzleTransform(swizzle))


def _check(n: int, k: int, launch: Launch, k_per_input: int = 1) -> int:
    if n % launch.block_n or launch.block_n % 64:
        raise ValueError(f"N={n} must split into blocks of {launch.block_n} rows (a multiple of 64)")
    if k % (launch.splits * launch.block_k):
        raise ValueError(f"K={k} must split into {launch.splits} x steps of {launch.block_k}")
    return k // launch.splits // launch.block_k


def _write(acc, o_smem, o_ref, i, s, bn):
    o_smem[...] = acc
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(o_smem, o_ref.at[s, pl.ds(i * bn, bn)])
    plgpu.wait_smem_to_gmem(0)


def gemv_bf16(w: jax.Array, x: jax.Array, launch: Launch = Launch(), interpret: bool = False) -> jax.Array:
    """w bf16 [N, K], x bf16 [16, K] -> float32 partials [splits, N, 16] (sum over splits = w @ x^T)."""
    n, k = w.shape
    bn, bk = launch.block_n, launch.block_k
    steps = _check(n, k, launch)
    klen = k // launch.splits

    def body(w_ref, x_ref, o_ref, o_smem):
        i, s = lax.axis_index("n"), lax.axis_index("s")

        def scope(acc_ref):
            def step(_, a_smem, b_smem):
                plgpu.wgmma(acc_ref, a_smem, plgpu.transpose_ref(b_smem, (1, 0)))
                plgpu.wgmma_wait(0)

            plgpu.emit_pipeline(
                step, grid=(steps,), max_concurrent_steps=launch.stages,
                in_specs=[plgpu.BlockSpec((bn, bk), lambda kk: (0, kk), transforms=_transforms(bk, w.dtype)),
                          plgpu.BlockSpec((COLS, bk), lambda kk: (0, kk), transforms=_transforms(bk, x.dtype))],
            )(w_ref.at[pl.ds(i * bn, bn), pl.ds(s * klen, klen)], x_ref.at[:, pl.ds(s * klen, klen)])
            return acc_ref[...]

        acc = pl.run_scoped(scope, plgpu.ACC((bn, COLS), jnp.float32))
        _write(acc, o_smem, o_ref, i, s, bn)

    return plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((launch.splits, n, COLS), jnp.float32),
        grid=(n // bn, launch.splits), grid_names=("n", "s"),
        scratch_types=[plgpu.SMEM((bn, COLS), jnp.float32)],
        interpret=interpret,
    )(w, x)


def _rebuild(lw, cw):
    """bf12 byte pairs (uint16) and code pairs (uint16-widened uint8) -> the even and odd inputs as bf16."""
    even = ((lw & 0x80) << 8) | ((cw & 0x0F) << 7) | (lw & 0x7F)
    odd = (lw & 0x8000) | ((cw & 0xF0) << 3) | ((lw >> 8) & 0x7F)
    return lax.bitcast_convert_type(even, jnp.bfloat16), lax.bitcast_convert_type(odd, jnp.bfloat16)


def gemv_bf12(low: jax.Array, codes: jax.Array, x_even: jax.Array, x_odd: jax.Array, launch: Launch = Launch(),
              interpret: bool = False) -> jax.Array:
    """low uint16 [N, K/2], codes uint8 [N, K/2], x's even and odd inputs bf16 [16, K/2] (times 2**X_SHIFT) ->
    float32 partials [splits, N, 16] before the row scales and escapes."""
    n, half = low.shape
    bn, bk = launch.block_n, launch.block_k  # bk: byte pairs a step (2 * bk inputs)
    steps = _check(n, half, launch)
    klen = half // launch.splits

    def body(l_ref, c_ref, xe_ref, xo_ref, o_ref, o_smem):
        i, s = lax.axis_index("n"), lax.axis_index("s")

        def scope(acc_ref):
            def step(_, l_smem, c_smem, xe_smem, xo_smem):
                lw = plgpu.load(l_smem, (), layout=plgpu.Layout.WGMMA)
                cw = plgpu.load(c_smem, (), layout=plgpu.Layout.WGMMA).astype(jnp.uint16)
                even, odd = _rebuild(lw, cw)
                plgpu.wgmma(acc_ref, even, plgpu.transpose_ref(xe_smem, (1, 0)))
                plgpu.wgmma(acc_ref, odd, plgpu.transpose_ref(xo_smem, (1, 0)))
                plgpu.wgmma_wait(0)

            rows = pl.ds(i * bn, bn)
            cols = pl.ds(s * klen, klen)
            plgpu.emit_pipeline(
                step, grid=(steps,), max_concurrent_steps=launch.stages,
                in_specs=[plgpu.BlockSpec((bn, bk), lambda kk: (0, kk), transforms=_transforms(bk, low.dtype)),
                          plgpu.BlockSpec((bn, bk), lambda kk: (0, kk), transforms=_transforms(bk, codes.dtype)),
                          plgpu.BlockSpec((COLS, bk), lambda kk: (0, kk), transforms=_transforms(bk, x_even.dtype)),
                          plgpu.BlockSpec((COLS, bk), lambda kk: (0, kk), transforms=_transforms(bk, x_odd.dtype))],
            )(l_ref.at[rows, cols], c_ref.at[rows, cols], xe_ref.at[:, cols], xo_ref.at[:, cols])
            return acc_ref[...]

        acc = pl.run_scoped(scope, plgpu.ACC((bn, COLS), jnp.float32))
        _write(acc, o_smem, o_ref, i, s, bn)

    return plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((launch.splits, n, COLS), jnp.float32),
        grid=(n // bn, launch.splits), grid_names=("n", "s"),
        scratch_types=[plgpu.SMEM((bn, COLS), jnp.float32)],
        interpret=interpret,
    )(low, codes, x_even, x_odd)
