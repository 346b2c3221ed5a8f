"""The residual add + RMSNorm between a decode layer's attention and its MLP: one kernel, or the jnp reference.

Dispatch (trace time), `impl=None` reading DGJAX_ADD_NORM (auto | ref | kernel, default auto):
- "auto": ref.py (GPU_PREFERRED False). On the H200 the kernel replaced XLA's two launches (the partials'
  sum with the add, then the norm as one Triton normalization fusion) but took 5.1 µs per layer where the
  two took ~3.3: one program per row reads all 16 float32 partials of the o projection (qwen3-30b-a3b fp8
  C1: device 3.69 ms per tick with it, 3.59 without; benchmarks/results/2026-12-01-s8a-*).
- "ref": ref.py. "kernel": the kernel for decode rows (<= 16), fed the quantized o projection's split-K
  partials unsummed (`SplitSums`) or a plain array (interpreted off GPU).
DGJAX_ADD_NORM_WARPS (a power of two, default kernel.default_warps): the kernel's warps a program. At 16-32 warps
the kernel took 3.0 µs a layer (5.1 at 4) but still tied XLA at best: it replaces only the norm fusion, and the
residual add after the feed-forward becomes a launch of its own (s24d, qwen3-30b-a3b fp8 C1 busy 2.68 vs 2.64-2.66
ms; benchmarks/results/2026-12-04-s24-limits-add-norm-l2-prefetch.md).
"""

from __future__ import annotations

import math

import jax

from dgjax.env import env_count
from dgjax.pallas import split_sums, stacked
from dgjax.pallas.add_rms_norm import kernel, ref
from dgjax.pallas.launch import choose_impl

IMPLS = ("auto", "ref", "kernel")
ENV_VAR = "DGJAX_ADD_NORM"
WARPS_ENV_VAR = "DGJAX_ADD_NORM_WARPS"
GPU_PREFERRED = False  # slower than XLA's fusions on the H200 (see above)


def use_kernel(x: jax.Array, splits: bool, impl: str | None = None) -> bool:
    """Whether `add_rms_norm` of x runs the kernel, for a delta that is (`splits`) or is not a SplitSums; a
    projection feeding it keeps its split-K partials when this holds for splits=True."""
    chosen = choose_impl(impl, ENV_VAR, IMPLS, "add rms norm")
    rows = math.prod(x.shape[:-1])
    if chosen == "ref" or not kernel.supports(rows, x.shape[-1]):
        return False
    return chosen == "kernel" or (GPU_PREFERRED and splits and jax.default_backend() == "gpu")


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
    warps = env_count(WARPS_ENV_VAR, None, "add rms norm warps", minimum=1, power_of_two=True)
    s, h = kernel.add_rms_norm(x.reshape(-1, width), flat, stack, row, eps=eps, num_warps=warps,
                               interpret=jax.default_backend() != "gpu")
    return s.reshape(shape), h.reshape(shape)
