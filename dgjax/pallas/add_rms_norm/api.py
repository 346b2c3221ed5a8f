"""The residual add + RMSNorm between a decode layer's attention and its MLP: one kernel, or the jnp reference.

Dispatch (trace time), `impl=None` reading DGJAX_ADD_NORM (auto | ref | kernel, default auto):
- "auto": the kernel on a GPU for decode rows (<= 16) when the added term is a split-K projection's
  `SplitSums` (the quantized o projection), where XLA ran three launches; ref.py otherwise (a plain add
  before XLA's own dots may fuse into them, and prefill chunks are long).
- "ref": ref.py. "kernel": the kernel wherever it supports the shape (interpreted off GPU).
Untimed on the GPU yet: DGJAX_ADD_NORM=ref is its A/B.
"""

from __future__ import annotations

import math

import jax

from dgjax.pallas import split_sums, stacked
from dgjax.pallas.add_rms_norm import kernel, ref
from dgjax.pallas.launch import choose_impl

IMPLS = ("auto", "ref", "kernel")
ENV_VAR = "DGJAX_ADD_NORM"


def use_kernel(x: jax.Array, splits: bool, impl: str | None = None) -> bool:
    """Whether `add_rms_norm` of x runs the kernel, for a delta that is (`splits`) or is not a SplitSums; a
    projection feeding it keeps its split-K partials when this holds for splits=True."""
    chosen = choose_impl(impl, ENV_VAR, IMPLS, "add rms norm")
    rows = math.prod(x.shape[:-1])
    if chosen == "ref" or not kernel.supports(rows, x.shape[-1]):
        return False
    return chosen == "kernel" or (splits and jax.default_backend() == "gpu")


def add_rms_norm(x: jax.Array, delta, weight, eps: float, impl: str | None = None) -> tuple[jax.Array, jax.Array]:
    """(x + delta, rms_norm(x + delta) * weight) for x [..., E] (see ref.py); delta may be a SplitSums, weight a
    StackedRow."""
    if not use_kernel(x, isinstance(delta, split_sums.SplitSums), impl):
        return ref.add_rms_norm(x, delta, weight, eps)
    shape, width = x.shape, x.shape[-1]
    if isinstance(delta, split_sums.SplitSums):
        flat = delta.replace(parts=delta.parts.reshape(delta.parts.shape[0], -1, width))
    else:
        flat = delta.reshape(-1, width)
    stack, row = stacked.as_stack(weight)
    s, h = kernel.add_rms_norm(x.reshape(-1, width), flat, stack, row, eps=eps,
                               interpret=jax.default_backend() != "gpu")
    return s.reshape(shape), h.reshape(shape)
