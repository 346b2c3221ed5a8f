"""Launch sizing shared by the Pallas kernels: how many programs fill the device, and the launch knobs of
a skinny-GEMM stage (MoE decode stages, quantized GEMV)."""

from __future__ import annotations

import dataclasses

import jax

PROGRAMS_PER_SM = 2
H200_SMS = 132  # used when the device does not report its multiprocessor count


def target_programs() -> int:
    """Programs worth launching: a couple per SM of the default device (H200's 132 SMs if unknown)."""
    sms = getattr(jax.devices()[0], "core_count", None) if jax.default_backend() == "gpu" else None
    return PROGRAMS_PER_SM * (sms or H200_SMS)


@dataclasses.dataclass(frozen=True)
class Launch:
    """One skinny-GEMM stage: output columns per program, K inputs per step, K splits, Triton params."""

    block_n: int
    block_k: int
    splits: int = 1
    num_warps: int = 4
    num_stages: int = 3
