"""Launch sizing shared by the Pallas kernels: how many programs fill the device, and the launch knobs of
a skinny-GEMM stage (MoE decode stages, quantized GEMV)."""

from __future__ import annotations

import dataclasses
import os

import jax
from jax.experimental import pallas as pl

PROGRAMS_PER_SM = 2
H200_SMS = 132  # used when the device does not report its multiprocessor count


def sm_count() -> int:
    """Multiprocessors of the default device (H200's 132 if it does not say, or off GPU)."""
    sms = getattr(jax.devices()[0], "core_count", None) if jax.default_backend() == "gpu" else None
    return sms or H200_SMS


def target_programs() -> int:
    """Programs worth launching: a couple per SM of the default device."""
    return PROGRAMS_PER_SM * sm_count()


@dataclasses.dataclass(frozen=True)
class Launch:
    """One skinny-GEMM stage: output columns per program, K inputs per step, K splits, Triton params.

    `unroll` K steps run per loop iteration (their loads issue together; a remainder runs one step at a
    time): where one step's tile is small, e.g. an fp8 step held inside one 128-wide scale block.
    """

    block_n: int
    block_k: int
    splits: int = 1
    num_warps: int = 4
    num_stages: int = 3
    unroll: int = 1

    def tag(self) -> str:
        """A short name for kernel names and tables."""
        extra = f"_u{self.unroll}" if self.unroll > 1 else ""
        return f"bn{self.block_n}_bk{self.block_k}_s{self.splits}_w{self.num_warps}_st{self.num_stages}{extra}"


def choose_impl(impl: str | None, env_var: str, impls: tuple[str, ...], what: str, default: str = "auto") -> str:
    """A kernel api's requested implementation: the argument, else $env_var, else `default`; validated."""
    chosen = (impl or os.environ.get(env_var) or default).strip().lower()
    if chosen not in impls:
        raise ValueError(f"{what} impl must be one of {impls}, got {chosen!r} (from {env_var} or impl=)")
    return chosen


def whole(shape) -> pl.BlockSpec:
    """A BlockSpec handing every program the whole array (kernels that index it themselves)."""
    return pl.BlockSpec(shape, lambda *_: (0,) * len(shape))


def split_steps(total_steps: int, splits: int) -> int | None:
    """K steps per split when `total_steps` are cut in `splits` (the last split may run fewer), or None where
    a split would run none."""
    per = -(-total_steps // splits)
    return per if (splits - 1) * per < total_steps else None
