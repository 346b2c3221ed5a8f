"""Decode results written into donated buffers, so a tick's CUDA graph keeps its addresses ($DGJAX_RESULT_MAILBOX).

Why: XLA re-records a whole command buffer (CUDA graph) whenever any buffer it captured moved since its last
run. A decode tick's sampled tokens and logprobs used to be fresh outputs, and while the host still held tick
N's (it reads them while tick N+1 runs), tick N+1's outputs landed elsewhere. So XLA re-recorded the tick's
graph on every tick: on the H200, qwen3-30b-a3b fp8 C1 logged an update of all 792 commands after every
single execution, 360-830 µs of host time a tick, "updated_allocs=2" (s15d in
benchmarks/results/2026-12-02-s15-graph-scheduling-and-updates.md). Here the tick takes a per-bucket "mailbox"
of its result's shapes as a donated argument, so XLA writes the results into those very buffers (input/output
aliasing), and a one-copy executable hands the host its own copy. The tick's graph then keeps its addresses
(s15e: 12 updates a run, at page boundaries, against 202; host time a dispatch 1.36-1.55 ms against 1.48-1.74;
qwen3 fp8 C1 361.6 / 362.0 / 358.0 tok/s against 361.4 / 326.3, the same greedy tokens).

Modes: "on" (default) or "off" (fresh outputs, as before).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dgjax.pallas.launch import choose_impl
from dgjax.runtime.steps import StepResult

ENV_VAR = "DGJAX_RESULT_MAILBOX"
MODES = ("on", "off")
DEFAULT = "on"


def enabled(mode: str | None = None) -> bool:
    """Whether decode ticks write into mailboxes: the argument, else $DGJAX_RESULT_MAILBOX, else DEFAULT."""
    return choose_impl(mode, ENV_VAR, MODES, "result mailbox", default=DEFAULT) == "on"


def shapes(width: int, num_top: int, sharding) -> tuple[jax.ShapeDtypeStruct, ...]:
    """The (tokens, logprobs, top_ids, top_logprobs) avals of a decode result of `width` rows."""
    return (
        jax.ShapeDtypeStruct((width,), jnp.int32, sharding=sharding),
        jax.ShapeDtypeStruct((width,), jnp.float32, sharding=sharding),
        jax.ShapeDtypeStruct((width, num_top), jnp.int32, sharding=sharding),
        jax.ShapeDtypeStruct((width, num_top), jnp.float32, sharding=sharding),
    )


def empty(width: int, num_top: int, sharding):
    """A zero mailbox (a StepResult) for a bucket's first tick: host zeros sent over, so nothing compiles."""
    return StepResult(*jax.device_put([np.zeros(s.shape, s.dtype) for s in shapes(width, num_top, sharding)],
                                      sharding))


def _copy(result):
    # `+ 0` / `| 0` rather than returning the inputs: jax forwards an unchanged input as the output without
    # running anything, which would hand the host the mailbox itself.
    return jax.tree.map(lambda a: a | 0 if jnp.issubdtype(a.dtype, jnp.integer) else a + 0, result)


def compile_copy(width: int, num_top: int, sharding):
    """The executable that copies a mailbox out for the host (compiled ahead, like the ticks)."""
    abstract = StepResult(*shapes(width, num_top, sharding))
    return jax.jit(_copy, out_shardings=sharding).lower(abstract).compile()
