"""Let Pallas' fp8 x fp8 dots reach Hopper's fp8 tensor-core instruction (wgmma e4m3).

Why: Pallas' Triton lowering builds `tt.dot` without `maxNumImpreciseAcc`, i.e. 0. Triton then refuses the
Hopper warpgroup MMA for fp8 operands with a float32 result ("would need float32 accumulation inside the MMA")
and falls back to mma.sync in f16, converting both fp8 tiles to f16 first: the conversions fp8 weights were
meant to avoid. With the attribute at the dot's K, the PTX for sm_90 is wgmma...e4m3.e4m3 with no conversion
(benchmarks/ptx_census.py; checked with Triton 3.9 on a [128, 128] x [128, 16] dot). K steps of 128 inside
one dot accumulate in the MMA's own (reduced precision) accumulator, and the kernels add each step's result
to a float32 accumulator after scaling it: the block-wise promotion DeepSeek-V3 uses for its fp8 GEMMs.

`install()` wraps the lowering rule of `dot_general` once; only dots whose operands are both float8 change.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from dgjax.pallas.lowering_hooks import wrap_triton_rule

_FP8 = (jnp.dtype(jnp.float8_e4m3fn), jnp.dtype(jnp.float8_e5m2))


def _mark_fp8_dots(inner):
    from jax._src.lib.mlir import ir

    def rule(ctx, a, b, **params):
        out = inner(ctx, a, b, **params)
        if all(jnp.dtype(aval.dtype) in _FP8 for aval in ctx.avals_in):
            op = out.owner
            if getattr(op, "name", "") == "tt.dot":
                (contract, _), _ = params["dimension_numbers"]
                k = ctx.avals_in[0].shape[contract[0]]
                op.attributes["maxNumImpreciseAcc"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), k)
        return out

    return rule


def install() -> bool:
    """Wrap Pallas-Triton's dot_general lowering so fp8 x fp8 dots carry maxNumImpreciseAcc = K. Idempotent;
    False where this JAX's Pallas has no Triton lowering to wrap (the dots then stay as they were)."""
    return wrap_triton_rule("fp8_mma", lambda: lax.dot_general_p, _mark_fp8_dots)
