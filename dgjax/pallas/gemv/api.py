"""Decode projections through the skinny GEMV kernel, with the RMSNorm before a projection fused in: opt-in.

Dispatch (trace time, per call), `impl=None` reading DGJAX_GEMV (auto | ref | kernel, default auto):
- "auto": rms_norm, then XLA's dot; on a GPU, small weights at decode widths as a K-split batched dot
  (`xla_splits`, see XLA_SPLITS).
- "ref": ref.py (rms_norm, then XLA's dot) everywhere.
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
# XLA's own plan for a small decode projection leaves most SMs idle: qwen3-30b-a3b's qkv ([2, 2048] x
# [2048, 5120], 21 MB) took 9.9 µs in the engine's trace (40 column blocks on 132 SMs). Split into 4 K
# slices as a batched dot, it took 6.7 µs with the partial sum, and its o projection 5.6 (H200,
# benchmarks/launch_sweep.py, 2026-12-01 session 5). Large weights already fill the GPU (glm-4.5-air's
# 117 MB qkv: 3.9 TB/s either way), so only weights up to XLA_SPLIT_MAX_BYTES are split.
XLA_SPLITS = 4
XLA_SPLIT_MAX_BYTES = 32 << 20
XLA_SPLIT_MAX_ROWS = 16


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


def xla_splits(rows: int, w: jax.Array) -> int:
    """K slices for XLA's dot of `rows` rows with a plain 2-D weight on the GPU (1: XLA's own plan)."""
    k, _ = w.shape
    small = w.size * w.dtype.itemsize <= XLA_SPLIT_MAX_BYTES
    fits = k % (XLA_SPLITS * 128) == 0
    return XLA_SPLITS if jax.default_backend() == "gpu" and rows <= XLA_SPLIT_MAX_ROWS and small and fits else 1


def split_k_dot(x: jax.Array, w: jax.Array, splits: int) -> jax.Array:
    """float32 x [M, K] . w [K, N] as `splits` K slices in one batched dot, then their sum."""
    (m, k), n = x.shape, w.shape[1]
    parts = jnp.einsum("msk,skn->smn", x.reshape(m, splits, k // splits), w.astype(x.dtype).reshape(splits, k // splits, n),
                       preferred_element_type=jnp.float32)
    return parts.sum(axis=0)


def gemv(x: jax.Array, w: jax.Array, norm: jax.Array | None = None, *, eps: float = 1e-6,
         impl: str | None = None, splits: int | None = None) -> jax.Array:
    """[M, N] float32 = (rms_norm(x, norm) if norm is given else x) [M, K] . w [K, N] (ref.py's contract).

    Without the kernel, XLA's dot; split along K (`split_k_dot`) by `xla_splits` unless `splits` says."""
    if not use_kernel(x.shape[0], x.dtype, w, impl):
        splits = xla_splits(x.shape[0], w) if splits is None else splits
        if splits == 1 or resolve_impl(impl) == "ref" or w.ndim != 2:
            return ref.gemv(x, w, norm, eps)
        return split_k_dot(ref.rms_norm(x, norm, eps) if norm is not None else x, w, splits)
    parts = kernel.gemv(x, w, norm, launch=launch_for(*w.shape), eps=eps, interpret=jax.default_backend() != "gpu")
    return jnp.sum(parts.astype(jnp.float32), axis=0)
