"""Decode projections through the skinny GEMV kernel, with the RMSNorm before a projection fused in: opt-in.

Dispatch (trace time, per call), `impl=None` reading DGJAX_GEMV (auto | ref | kernel, default auto):
- "ref" and "auto": ref.py (rms_norm, then XLA's dot) everywhere.
- "kernel": the kernel for 1-16 rows of a plain 2-D weight whose shape it tiles (interpreted off GPU;
  float32 runs as TF32 on a GPU), ref.py otherwise (prefill chunks, quantized weights, which go to
  dgjax.pallas.quant_gemv).
Why opt-in: in the engine it lost to XLA. Device trace of qwen3-30b-a3b single-stream decode on the H200
(2026-12-01, benchmarks/results/2026-12-01-s4-*): qkv with the input norm fused 14.6 µs per layer vs XLA's
9.9 µs dot + 1.8 µs norm; o projection 6.7 vs 6.0 µs; 313.8 tok/s without the kernel, 292.1 with it, and
llama-3.1-8b 237.9 vs 230.6. (The isolated sweep, benchmarks/gemv_kernel_sweep.py, had favoured the kernel
on the small projections, 11.8 vs 15.6 µs for that qkv: its per-product times carry a launch overhead
the engine's command buffers do not.) The norm prologue re-reads x over all of K before the weight stream
starts, latency the small projections cannot hide.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dgjax.pallas.gemv import kernel, ref
from dgjax.pallas.launch import Launch, choose_impl

IMPLS = ("auto", "ref", "kernel")
ENV_VAR = "DGJAX_GEMV"
TARGET_PROGRAMS = 96  # column blocks x K splits: the sweep's winners sat at 96-160 programs


def resolve_impl(impl: str | None = None) -> str:
    return choose_impl(impl, ENV_VAR, IMPLS, "gemv")


def launch_for(k: int, n: int) -> Launch | None:
    """128-column blocks (smaller only for small N), K split up to 8 ways until the grid has
    TARGET_PROGRAMS programs, 256-row K steps where they divide (the sweep's winners)."""
    bn = next((b for b in (128, 64, 32, 16) if n % b == 0), None)
    if bn is None:
        return None
    splits = 1
    while (n // bn) * splits < TARGET_PROGRAMS and splits < 8 and k % (2 * splits * 128) == 0:
        splits *= 2
    bk = next((b for b in (256, 128, 64, 32, 16) if (k // splits) % b == 0), None)
    return None if bk is None else Launch(block_n=bn, block_k=bk, splits=splits)


def use_kernel(rows: int, x_dtype, w, impl: str | None = None) -> bool:
    """Whether the product runs the kernel: only when asked for ("kernel") and the shapes allow it."""
    if resolve_impl(impl) != "kernel" or not isinstance(w, jax.Array) or w.ndim != 2 or w.dtype != x_dtype:
        return False
    launch = launch_for(*w.shape)
    return launch is not None and kernel.supports(rows, *w.shape, launch)


def gemv(x: jax.Array, w: jax.Array, norm: jax.Array | None = None, *, eps: float = 1e-6,
         impl: str | None = None) -> jax.Array:
    """[M, N] float32 = (rms_norm(x, norm) if norm is given else x) [M, K] . w [K, N] (ref.py's contract)."""
    if not use_kernel(x.shape[0], x.dtype, w, impl):
        return ref.gemv(x, w, norm, eps)
    parts = kernel.gemv(x, w, norm, launch=launch_for(*w.shape), eps=eps, interpret=jax.default_backend() != "gpu")
    return jnp.sum(parts.astype(jnp.float32), axis=0)
