"""Residual add + RMSNorm for a decode tick's few rows as one Pallas kernel (Triton lowering).

Why: between attention and the MLP a decode layer adds the attention output to the residual stream and
normalizes the sum. With the quantized o projection split over K (16 float32 partials at qwen3-30b-a3b
shapes), XLA runs that as two kernels per layer: the partials' sum plus the add, then the norm as one
Triton normalization fusion (three at 1 row). Here one program per row loads the whole row once (E padded
to a power of two, masked), sums the partials, adds, rounds, reduces and scales in registers, and stores both
the new residual and the normalized row. On the H200 that single program per row was slower than XLA's two
launches (api.py), so the kernel is opt-in.
Numerics: as ref.py: partials summed in float32 and rounded to x's dtype (then a bias added and rounded),
the sum rounded to x's dtype, the norm in float32 on the rounded sum, the result rounded.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

from dgjax.pallas.split_sums import SplitSums

MAX_ROWS = 16  # decode widths; longer inputs (prefill chunks) take ref.py
MAX_WIDTH = 16384  # one row in registers


def supports(rows: int, width: int) -> bool:
    return 1 <= rows <= MAX_ROWS and 1 <= width <= MAX_WIDTH


def _kernel(x_ref, d_ref, w_ref, row_ref, *refs, rows: int, width: int, parts: int, has_bias: bool, eps: float):
    bias_ref = refs[0] if has_bias else None
    s_ref, h_ref = refs[-2:]
    one = jnp.zeros((1, 1), jnp.int32)
    r = one + pl.program_id(0)
    cols = lax.broadcasted_iota(jnp.int32, (1, pl.next_power_of_2(width)), 1)
    inside = cols < width
    dtype = s_ref.dtype
    x = plgpu.load(x_ref.at[r, cols], mask=inside, other=0).astype(jnp.float32)
    if parts:
        total = plgpu.load(d_ref.at[r, cols], mask=inside, other=0.0)
        for p in range(1, parts):
            total = total + plgpu.load(d_ref.at[r + p * rows, cols], mask=inside, other=0.0)
        delta = total.astype(dtype)
        if bias_ref is not None:
            bias = plgpu.load(bias_ref.at[one, cols], mask=inside, other=0)
            delta = (delta.astype(jnp.float32) + bias.astype(jnp.float32)).astype(dtype)
    else:
        delta = plgpu.load(d_ref.at[r, cols], mask=inside, other=0).astype(dtype)
    s = (x + delta.astype(jnp.float32)).astype(dtype)
    sf = s.astype(jnp.float32)
    inv = lax.rsqrt(jnp.sum(sf * sf, axis=1, keepdims=True) / width + eps)
    w = plgpu.load(w_ref.at[one + row_ref[0], cols], mask=inside, other=0).astype(jnp.float32)
    plgpu.store(s_ref.at[r, cols], s, mask=inside)
    plgpu.store(h_ref.at[r, cols], (sf * inv * w).astype(dtype), mask=inside)


def default_warps(width: int) -> int:
    """4 warps a program, 8 past 2048 columns (session 8's launch)."""
    return 8 if width > 2048 else 4


@functools.partial(jax.jit, static_argnames=("eps", "num_warps", "interpret"))
def add_rms_norm(x: jax.Array, delta: jax.Array | SplitSums, weight: jax.Array, row: jax.Array | int = 0, *,
                 eps: float, num_warps: int | None = None, interpret: bool = False) -> tuple[jax.Array, jax.Array]:
    """ref.add_rms_norm for x [R, E] (R <= 16): delta [R, E] or SplitSums (partials [S, R, E], optional bias
    [E]); weight [L, E] of which row `row` is read in place (a runtime argument, so all layers share one
    kernel). `num_warps` (default `default_warps`): more warps hold fewer of a row's values each, so more of the
    partials' loads can be in flight at once."""
    rows, width = x.shape
    if not supports(rows, width):
        raise ValueError(f"add_rms_norm kernel: {rows} rows of {width} (at most {MAX_ROWS} x {MAX_WIDTH})")
    warps = num_warps or default_warps(width)
    parts = delta.parts.shape[0] if isinstance(delta, SplitSums) else 0
    d = delta.parts.reshape(parts * rows, width) if parts else delta
    has_bias = bool(parts) and delta.bias is not None
    args = [x, d, weight.reshape(-1, width), jnp.asarray(row, jnp.int32).reshape(1)]
    if has_bias:
        args.append(delta.bias.reshape(1, width))
    whole = lambda a: pl.BlockSpec(a.shape, lambda i: (0,) * a.ndim)  # noqa: E731
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return pl.pallas_call(
        functools.partial(_kernel, rows=rows, width=width, parts=parts, has_bias=has_bias, eps=eps),
        grid=(rows,),
        in_specs=[whole(a) for a in args],
        out_specs=[whole(out), whole(out)],
        out_shape=[out, out],
        compiler_params=plgpu.CompilerParams(num_warps=warps, num_stages=1),
        interpret=interpret,
        name=f"add_rms_norm_s{parts}_e{width}_w{warps}",
    )(*args)
