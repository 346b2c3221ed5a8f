"""Decode ticks that read and write the same buffers every tick, so their CUDA graphs keep their addresses
($DGJAX_STABLE_BUFFERS).

Why: XLA re-records a whole command buffer (CUDA graph) whenever any buffer it captured moved since its last
run. A decode tick's sampled tokens and logprobs used to be fresh outputs, and while the host still held tick
N's (it reads them while tick N+1 runs), tick N+1's outputs landed elsewhere. So XLA re-recorded the tick's
graph on every tick: on the H200, qwen3-30b-a3b fp8 C1 logged an update of all 792 commands after every
single execution, 360-830 µs of host time a tick, "updated_allocs=2" (s15d in
benchmarks/results/2026-12-02-s15-graph-scheduling-and-updates.md). With stable buffers:
- results: each decode bucket keeps a result-shaped "mailbox" that the tick takes donated, so XLA writes the
  results into those very buffers (input/output aliasing); a one-copy executable hands the host its own copy.
  s15e: 12 updates of the tick's graph a run, at page boundaries, against 202; host time a dispatch 1.36-1.55 ms
  against 1.48-1.74; qwen3 fp8 C1 361.6 / 362.0 / 358.0 tok/s against 361.4 / 326.3, the same greedy tokens.
- the batch layout (slot ids, active rows, block tables), which changes whenever a row starts a new page (every
  page-size ticks a stream: about every tick at 16 streams), is written into the width's previous layout
  buffers by a small executable instead of arriving in fresh ones.
- the split tick's logits (`decode_forward` for grammar rows) land in a donated per-width buffer too.

Modes: "on" (default) or "off" (fresh buffers, as before).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dgjax.pallas.launch import choose_impl
from dgjax.runtime.steps import StepResult

ENV_VAR = "DGJAX_STABLE_BUFFERS"
MODES = ("on", "off")
DEFAULT = "on"


def enabled(mode: str | None = None) -> bool:
    """Whether decode ticks use stable buffers: the argument, else $DGJAX_STABLE_BUFFERS, else DEFAULT."""
    return choose_impl(mode, ENV_VAR, MODES, "stable buffers", default=DEFAULT) == "on"


def result_shapes(width: int, num_top: int, sharding) -> StepResult:
    """The avals of a decode result of `width` rows (tokens, logprobs, top ids, top logprobs)."""
    return StepResult(
        jax.ShapeDtypeStruct((width,), jnp.int32, sharding=sharding),
        jax.ShapeDtypeStruct((width,), jnp.float32, sharding=sharding),
        jax.ShapeDtypeStruct((width, num_top), jnp.int32, sharding=sharding),
        jax.ShapeDtypeStruct((width, num_top), jnp.float32, sharding=sharding),
    )


def mailbox_of(result: StepResult) -> StepResult:
    """The part of a decode result (arrays or avals) its tick writes in place: the arrays with elements. A
    tick without top-logprobs returns two [B, 0] arrays; donated too, they cost the tick's CUDA graph two
    copies from constants (442 commands against 440 for llama-3.1-8b at 4 rows). Those runs (s16a, s16d) all
    lost XLA's early launches between kernels (llama C4 876.6-884.0 tok/s against 907.3-914.4 with fresh
    buffers); without the copies (s16e) both switches lost them alike on another machine (879.6-883.2), so
    whether the copies were the cause is open. Empty arrays have no address to keep: they stay fresh outputs."""
    return jax.tree.map(lambda a: a if math.prod(a.shape) else None, result)


def mailbox_shapes(width: int, num_top: int, sharding) -> StepResult:
    """The avals of the mailbox a `width`-row decode tick takes donated (see `mailbox_of`)."""
    return mailbox_of(result_shapes(width, num_top, sharding))


def zeros(avals, sharding):
    """Device zeros shaped like the pytree `avals`: host zeros sent over in one transfer, so nothing compiles.
    (A bucket's first tick writes its results into a buffer of the runtime's own even where these cannot be
    donated, so the addresses hold from its second tick on.)"""
    leaves, tree = jax.tree.flatten(avals)
    return jax.tree.unflatten(tree, jax.device_put([np.zeros(a.shape, a.dtype) for a in leaves], sharding))


def _copy(result):
    # `| 0` / `+ 0` rather than returning the inputs: jax forwards an unchanged input as the output without
    # running anything, which would hand the host the mailbox itself.
    def fresh(a):
        if jnp.issubdtype(a.dtype, jnp.floating):
            return a + 0
        return a | (False if a.dtype == jnp.bool_ else 0)

    return jax.tree.map(fresh, result)


def compile_copy(avals, sharding):
    """The executable that copies a mailbox (pytree of `avals`) out for the host; compiled ahead like the ticks."""
    return jax.jit(_copy, out_shardings=sharding).lower(avals).compile()


def _overwrite(old, new):
    return jax.tree.map(lambda o, n: lax.dynamic_update_slice(o, n, (0,) * o.ndim), old, new)


def compile_overwrite(avals, sharding):
    """`(old, new) -> old's buffers holding new`: `old` donated, so the result keeps old's addresses."""
    return jax.jit(_overwrite, donate_argnums=0, out_shardings=sharding).lower(avals, avals).compile()
