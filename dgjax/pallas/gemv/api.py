"""Decode projections through the skinny GEMV kernel where it beats XLA's dot, with the RMSNorm fused in.

Dispatch (trace time, per call), `impl=None` reading DGJAX_GEMV (auto | ref | kernel, default auto):
- "ref": ref.py everywhere (rms_norm, then XLA's dot).
- "auto": the kernel on a GPU for 1-16 rows of bf16/f16 with a plain weight in the size window below,
  ref.py otherwise (CPU, prefill chunks, quantized weights, which go to dgjax.pallas.quant_gemv).
- "kernel": the kernel wherever the shapes allow (interpreted off GPU; float32 too, as TF32 on a GPU).
Size window, from benchmarks/gemv_kernel_sweep.py on the H200 (2026-12-01, rows 2): the kernel beat XLA
on qwen3-30b-a3b's qkv (21 MB: 11.8 vs 15.6 µs) and o (17 MB: 10.4 vs 11.1) and llama-3.1-8b's o (34 MB:
13.4 vs 14.9), tied on llama's qkv (50 MB: 17.3 both; the fused norm's saved launch decides) and lost on
the 117-235 MB MLP weights (63.0 vs 58.0 µs). Below 8 MB (a router) launch cost dominates either way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dgjax.pallas.gemv import kernel, ref
from dgjax.pallas.launch import Launch, choose_impl

IMPLS = ("auto", "ref", "kernel")
ENV_VAR = "DGJAX_GEMV"
MIN_BYTES = 8 << 20
MAX_BYTES = 40 << 20  # plain GEMV
MAX_BYTES_NORMED = 64 << 20  # with the norm fused, which saves a launch (~2 µs)
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


def use_kernel(rows: int, x_dtype, w, normed: bool, impl: str | None = None) -> bool:
    chosen = resolve_impl(impl)
    if chosen == "ref" or not isinstance(w, jax.Array) or w.ndim != 2 or w.dtype != x_dtype:
        return False
    launch = launch_for(*w.shape)
    if launch is None or not kernel.supports(rows, *w.shape, launch):
        return False
    if chosen == "kernel":
        return True
    if jnp.dtype(x_dtype) not in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16)):
        return False  # float32 would run as TF32 on the tensor cores
    nbytes = w.size * w.dtype.itemsize
    in_window = MIN_BYTES <= nbytes <= (MAX_BYTES_NORMED if normed else MAX_BYTES)
    return in_window and jax.default_backend() == "gpu"


def gemv(x: jax.Array, w: jax.Array, norm: jax.Array | None = None, *, eps: float = 1e-6,
         impl: str | None = None) -> jax.Array:
    """[M, N] float32 = (rms_norm(x, norm) if norm is given else x) [M, K] . w [K, N] (ref.py's contract)."""
    if not use_kernel(x.shape[0], x.dtype, w, norm is not None, impl):
        return ref.gemv(x, w, norm, eps)
    parts = kernel.gemv(x, w, norm, launch=launch_for(*w.shape), eps=eps, interpret=jax.default_backend() != "gpu")
    return jnp.sum(parts.astype(jnp.float32), axis=0)
