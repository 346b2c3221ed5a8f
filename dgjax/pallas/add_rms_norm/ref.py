"""The residual add and the RMSNorm after it, in jnp: what the decoder computes between attention and the MLP."""

from __future__ import annotations

import jax

from dgjax.pallas import split_sums, stacked
from dgjax.pallas.gemv import ref as gemv_ref


def add_rms_norm(x: jax.Array, delta, weight, eps: float) -> tuple[jax.Array, jax.Array]:
    """(s, rms_norm(s) * weight) with s = x + delta in x's dtype; x [..., E]; delta an array like x, or a split-K
    projection's SplitSums of one (summed and rounded first); weight [E] or a StackedRow of a [L, E] stack."""
    s = x + split_sums.value(delta).astype(x.dtype)
    return s, gemv_ref.rms_norm(s, stacked.value(weight), eps)
