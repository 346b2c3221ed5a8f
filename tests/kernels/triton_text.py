"""The Triton modules (TTIR text) a function's Pallas kernels lower to for CUDA, on a machine without a GPU."""

from __future__ import annotations

import jax


def cuda_triton_modules(fn, *specs) -> list[str]:
    """Lower jit(fn) at `specs` (ShapeDtypeStructs) for CUDA and return every Triton module it built, as text."""
    from jax._src.pallas.triton import lowering

    found = []
    lower = lowering.lower_jaxpr_to_triton_module

    def grab(*args, **kwargs):
        result = lower(*args, **kwargs)
        found.append(str(result.module))
        return result

    lowering.lower_jaxpr_to_triton_module = grab
    try:
        jax.jit(fn).trace(*specs).lower(lowering_platforms=("cuda",))
    finally:
        lowering.lower_jaxpr_to_triton_module = lower
    return found
