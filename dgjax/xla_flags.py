"""XLA flags dgjax sets by default (before JAX creates its backends), each kept only if the user has not set it.

`--xla_gpu_graph_min_graph_size=1`: XLA puts runs of at least this many kernels into one CUDA graph
(default 5). A decode tick interleaves Pallas kernels with short runs of XLA fusions, so with the default
many runs stay outside graphs and each of their kernels costs a host launch. On the H200
(benchmarks/results/2026-12-01-s6d-host-cost.md) it cut the host cost of a tiny-width qwen3-30b-a3b fp8
tick from 3.35 to 2.55 ms and of a chain of 400 XLA kernels from 945 to 525 µs.
Set DGJAX_DEFAULT_XLA_FLAGS=0 to leave XLA_FLAGS untouched.
"""

from __future__ import annotations

import os

DEFAULTS = {"--xla_gpu_graph_min_graph_size": "1"}
ENV = "DGJAX_DEFAULT_XLA_FLAGS"


def with_defaults(flags: str) -> str:
    """`flags` plus every default whose flag name it does not mention."""
    given = {f.split("=", 1)[0] for f in flags.split()}
    extra = [f"{k}={v}" for k, v in DEFAULTS.items() if k not in given]
    return " ".join([flags.strip(), *extra]).strip()


def apply() -> None:
    """Add the defaults to $XLA_FLAGS (read once, when JAX first creates a backend)."""
    if os.environ.get(ENV, "1").strip() in ("0", "false", "no"):
        return
    os.environ["XLA_FLAGS"] = with_defaults(os.environ.get("XLA_FLAGS", ""))
