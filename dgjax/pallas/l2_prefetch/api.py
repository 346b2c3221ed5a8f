"""The next layer's attention weights read into L2 while this layer's feed-forward runs ($DGJAX_L2_PREFETCH).

Why: a qwen3-30b-a3b fp8 decode layer's q/k/v and o GEMVs (10.5 + 8.4 MB) read HBM from a cold start; with their
weight already in L2 they ran 6.50 -> 4.90 and 5.44 -> 3.87 µs (benchmarks/results/2026-12-03-s17a-*). The
feed-forward before them (router, selection, the experts: ~25 µs a layer) leaves HBM partly idle (its kernels
are latency-bound), so the prefetch kernel (kernel.py, 132 programs, ~1.3 TB/s) can run beside it. That needs a
CUDA graph built from buffer dependencies (DGJAX_GRAPH_SCHEDULING=concurrent): the prefetch takes the layer's
normed feed-forward input as an unread operand (so it starts no earlier), and the next layer's q/k/v GEMV takes
the prefetch's result the same way (so it starts no earlier than the prefetch ends). Results do not change.

Modes: "off" (default) or "attention" (each layer but the last prefetches the next layer's q/k/v and o weights,
where they are quantized nodes the GEMV kernel reads on a GPU, fused q/k/v, and together fit in PREFETCH_MAX_BYTES).
Measured on the H200 (s24e, benchmarks/results/2026-12-04-s24-limits-add-norm-l2-prefetch.md), qwen3-30b-a3b fp8 C1
with concurrent scheduling: q/k/v 5.36 vs 6.0 µs a layer and o 4.38 vs 4.93 from L2, but the prefetch kernels
sharing the SMs slowed the experts and XLA's small fusions by more: busy 2.80 vs 2.64 ms a tick. Hence off.
"""

from __future__ import annotations

from typing import Any

import jax

from dgjax.pallas.l2_prefetch import kernel
from dgjax.pallas.launch import choose_impl
from dgjax.quant import is_quantized

ENV_VAR = "DGJAX_L2_PREFETCH"
MODES = ("off", "attention")
PROGRAMS = 132  # one per H200 SM: ~1.3 TB/s (benchmarks/limits_probe.py), what the feed-forward leaves idle
PREFETCH_MAX_BYTES = 32 << 20  # well inside the H200's 50 MB L2, beside the experts' streams


def mode() -> str:
    return choose_impl(None, ENV_VAR, MODES, "l2 prefetch", default="off")


def _on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def _weight_bytes(w: Any) -> jax.Array | None:
    """The array holding a quantized node's packed weight, if it reads as whole KB rows."""
    a = getattr(w, "weight", None)
    if a is None or (a.size * a.dtype.itemsize) % (4 * kernel.WORDS):
        return None
    return a


def attention_weights(attn: Any) -> tuple[jax.Array, ...]:
    """The next layer's q/k/v and o packed weights to prefetch, or () where the mode, platform or weights rule it
    out."""
    if mode() != "attention" or not _on_gpu():
        return ()
    qkv, o = getattr(attn, "qkv", None), getattr(attn, "o", None)
    if not (is_quantized(qkv) and is_quantized(o)):
        return ()
    arrays = tuple(_weight_bytes(w) for w in (qkv, o))
    if any(a is None for a in arrays) or sum(a.size * a.dtype.itemsize for a in arrays) > PREFETCH_MAX_BYTES:
        return ()
    return arrays


def prefetch(arrays: tuple[jax.Array, ...], after: jax.Array) -> tuple[jax.Array, ...]:
    """One prefetch kernel per array, each starting after `after`'s producer: their results, for the reader of
    `arrays` to take as unread operands (quant_gemv's `after`)."""
    interpret = jax.default_backend() != "gpu"
    return tuple(kernel.l2_prefetch(a, programs=PROGRAMS, after=(after,), interpret=interpret) for a in arrays)
