"""bf16 activations handed to a kernel as float16 ("carried"), written by the fusion or kernel that produces them.

Why: the fp8 kernels' default dot runs in float16 (one paired e4m3 -> f16 conversion per two weights), so each of
their programs rescaled bf16 rows into f16's range in every K step (row max, power of two, conversion:
moe_decode/tiles.py `f16_rows`). On the H200 that cost 0.5-0.8 µs of a 6-8 µs decode GEMV (session 22, s22a:
qwen3-30b-a3b q/k/v 7.7 vs 7.0 µs, o 6.6 vs 6.1; glm-4.5-air q/k/v 19.9 vs 19.1 on f16 rows). The producer of the
rows (the RMSNorm's fusion, the experts' activation, the attention's split merge) writes them as f16 instead, at
no cost, and the kernel multiplies them as they are.
"""

from __future__ import annotations

import jax.numpy as jnp

from dgjax.pallas.launch import choose_impl

F16_MAX = 65504.0
ENV_VAR = "DGJAX_F16_CARRY"


def enabled() -> bool:
    """$DGJAX_F16_CARRY (on | off, default on; read at trace time): whether producers carry bf16 rows as f16 for
    the fp8 kernels that take them (`moe_decode.tiles.carries_f16`); off: bf16 rows, rescaled in every K step."""
    return choose_impl(None, ENV_VAR, ("on", "off"), "f16 carried rows", default="on") == "on"


def f16_carrier(x):
    """x's values rounded to bf16 (as the bf16 model rounds them) and held as float16: exact for every bf16 value
    in f16's normal range [2**-14, 65504] (f16's 10 mantissa bits hold bf16's 7). Values beyond 65504 saturate
    (bf16 activations that large do not occur in these rows); values below 2**-14 (~6e-5) become f16
    subnormals, rounded to a multiple of 2**-24: at most 2**-25 of absolute error on such a term."""
    return jnp.clip(x.astype(jnp.bfloat16).astype(jnp.float32), -F16_MAX, F16_MAX).astype(jnp.float16)
