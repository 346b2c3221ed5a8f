"""`ops.matmul`'s quantized branch: the Pallas GEMV kernel for decode-sized inputs, the reference otherwise.

Dispatch (decided at trace time, per call):
- impl "ref": the reference (`dgjax.quant.reference_matmul`) everywhere.
- impl "auto" (default): the kernel (kernel.py) on a GPU when x has 1-16 rows and `kernel.supports` reads
  the weight's format and shape, for the formats in GPU_VALIDATED_FORMATS; the reference otherwise (CPU,
  prefill chunks, unsupported layouts, formats not yet checked on the GPU).
- impl "kernel": the kernel on any platform (the Pallas interpreter off GPU) wherever it supports the case,
  the reference elsewhere (rows > 16 is the normal prefill case, so no warning for it).
`impl=None` reads DGJAX_QUANT_GEMV (auto | ref | kernel, default auto), so one process can trace both paths
by setting the variable before each trace.
DGJAX_QUANT_GEMV_FUSE (all | norm | splits | none, default splits) says which of the kernel's fusions the
models may use: the input RMSNorm in the prologue (`norm`), split-K partials handed on unsummed as
`SplitSums` (`splits`). On the H200 (qwen3-30b-a3b fp8 C1, benchmarks/results/2026-12-01-s8d-*):
- `splits`: 355.2 tok/s, device 2.89 ms per tick;
- `none`: 316.9 tok/s, 2.93 ms;
- `all`: 256-285 tok/s, 3.59-3.69 ms (s8a). The norm prologue took the qkv GEMV from 327 to 792 µs per tick.
- `all` with the late norm: 329.8 tok/s, 3.08 ms.
So the fused norm is off by default, and the SplitSums handoff stays.
DGJAX_QUANT_GEMV_NORM (prologue | late, default prologue) says how a fused norm runs: the rows' RMS scale
over all of K before the weight stream, or summed alongside it and applied to the result (kernel.py).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import jax

from dgjax.pallas import stacked
from dgjax.pallas.carrier import f16_carrier
from dgjax.pallas.gemv.ref import rms_norm
from dgjax.pallas.launch import choose_impl
from dgjax.pallas.moe_decode import tiles
from dgjax.pallas.quant_gemv import kernel
from dgjax.pallas.split_sums import SplitSums
from dgjax.quant import reference_matmul

IMPLS = ("auto", "ref", "kernel")
# Formats benchmarks/quant_gemv_check.py has checked against the reference on the H200 (2026-12-01,
# benchmarks/results/2026-12-01-quant-gemv-check-nvidia-h200.md: fp8 2-4x, nvfp4/mxfp4 ~3x faster than the
# dequantizing reference). The int4/int8 group formats have passed the interpret-mode and Triton-lowering
# tests only: auto keeps the reference for them and `kernel` opts in. bf12: checked 2026-12-04
# (benchmarks/results/2026-12-04-s25-bf12.md: 0 error at 1 row, bf16 output rounding above).
GPU_VALIDATED_FORMATS = frozenset({"fp8", "nvfp4", "mxfp4", "bf12"})
ENV_VAR = "DGJAX_QUANT_GEMV"
MAX_ROWS = kernel.MAX_ROWS
log = logging.getLogger(__name__)


def resolve_impl(impl: str | None = None) -> str:
    """The requested implementation: the argument, else $DGJAX_QUANT_GEMV, else "auto"."""
    return choose_impl(impl, ENV_VAR, IMPLS, "quant gemv")


def use_kernel(rows: int, w: Any, x_dtype: Any, impl: str | None = None) -> bool:
    """Whether a product of `rows` rows of `x_dtype` with the quantized node `w` runs the kernel."""
    chosen = resolve_impl(impl)
    if chosen == "ref" or rows > MAX_ROWS:
        return False
    supported = kernel.supports(rows, w, x_dtype)
    if chosen == "kernel" and not supported and rows >= 1:
        log.warning("quantized GEMV kernel does not read a %s weight of shape %s with %s rows: using the reference",
                    type(w).__name__, w.shape, x_dtype)
    validated = supported and kernel.describe(w).fmt in GPU_VALIDATED_FORMATS
    return supported and (chosen == "kernel" or (validated and jax.default_backend() == "gpu"))


FUSE_ENV_VAR = "DGJAX_QUANT_GEMV_FUSE"
FUSIONS = ("all", "norm", "splits", "none")


NORM_ENV_VAR = "DGJAX_QUANT_GEMV_NORM"
NORM_MODES = ("prologue", "late")


def fusions() -> tuple[bool, bool]:
    """(fuse the norm, keep splits) as DGJAX_QUANT_GEMV_FUSE allows them (default: splits only)."""
    chosen = choose_impl(None, FUSE_ENV_VAR, FUSIONS, "quant gemv fusion", default="splits")
    return chosen in ("all", "norm"), chosen in ("all", "splits")


def _kernel_takes(x: Any, w: Any, contract: int, impl: str | None) -> tuple[tuple[int, ...], int, bool]:
    """(x's lead shape, its row count, whether `quant_matmul` runs the kernel on it)."""
    lead = tuple(x.shape[: x.ndim - contract])
    rows = math.prod(lead)
    shaped = contract == w.in_dims and not w.expert_dims and tuple(x.shape[x.ndim - contract:]) == w.in_shape
    return lead, rows, shaped and use_kernel(rows, w, x.dtype, impl)


def carries_input(x: Any, w: Any, *, contract: int = 1, impl: str | None = None) -> bool:
    """Whether `quant_matmul(x, w)` (x an array or a shape struct) runs the kernel on an fp8 weight under the f16 dot
    with bf16 x: then a producer kernel of x may hand it over as f16 (dgjax/pallas/carrier.py; e.g. the decode
    attention's merge for o)."""
    return _kernel_takes(x, w, contract, impl)[2] and tiles.carries_f16(kernel.describe(w), x.dtype)


def quant_matmul(x: jax.Array, w: Any, *, contract: int = 1, out_dtype: Any = None, impl: str | None = None,
                 launch: kernel.Launch | None = None, norm: Any = None, eps: float = 1e-6,
                 keep_splits: bool = False, carry: bool = False, after: tuple = ()) -> Any:
    """x [..., *in] . w (quantized, dense [*in, *out]) -> [..., *out], as `reference_matmul` computes it.

    `norm` ([K] or a `StackedRow` of a [layers, K] stack; contract 1 only): rms_norm(x, norm) first, which
    the kernel applies in its prologue (reading a stacked row in place) instead of a launch of its own.
    `keep_splits`: where the kernel splits K, the result is a `SplitSums` of [splits, *lead, *out] partials
    (its `value()` is the ordinary result); an array otherwise.
    `carry`: the caller's x comes out of an XLA fusion that has no other reader (a norm, an activation), so where
    the kernel runs an fp8 weight under the f16 dot, x is handed over as f16 (`carrier.f16_carrier`, which that
    fusion absorbs) and the kernel skips its per-step rescaling of x; the result keeps x's dtype.
    `after`: arrays the kernel takes as unread operands, to run after their producers (kernel.quant_gemv); the
    reference path ignores them."""
    if norm is not None and contract != 1:
        raise ValueError("quant_matmul fuses a norm only over one contracted dim")
    lead, rows, kernel_ok = _kernel_takes(x, w, contract, impl)
    fuse_norm, fuse_splits = fusions()
    if norm is not None and not (kernel_ok and fuse_norm and kernel.describe(w).fmt != "bf12"):
        x, norm = rms_norm(x, stacked.value(norm), eps), None
    if not kernel_ok:
        return reference_matmul(x, w, contract=contract, out_dtype=out_dtype)
    if carry and norm is None and tiles.carries_f16(kernel.describe(w), x.dtype):
        x, out_dtype = f16_carrier(x), out_dtype or x.dtype
    stack, row = (None, 0) if norm is None else stacked.as_stack(norm)
    late = norm is not None and choose_impl(None, NORM_ENV_VAR, NORM_MODES, "fused norm", "prologue") == "late"
    out = kernel.quant_gemv(x.reshape(rows, w.k), w, stack, row, out_dtype=out_dtype, launch=launch, eps=eps,
                            keep_splits=keep_splits and fuse_splits, late_norm=late, after=tuple(after),
                            interpret=jax.default_backend() != "gpu")
    if isinstance(out, SplitSums):
        return out.replace(parts=out.parts.reshape((out.parts.shape[0],) + lead + w.out_shape))
    return out.reshape(lead + w.out_shape)

