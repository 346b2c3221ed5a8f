"""A decode tick's CUDA graph found running in the slow mode at startup, moved to a fast one
($DGJAX_GRAPH_CHECK).

Why: on the H200 a decode tick's CUDA graph runs in one of two modes, with the same kernels: qwen3-30b-a3b fp8 C1
ticks of 2.65-2.70 ms or of 2.93-2.96 ms (~10%; every kernel edge starts ~0.3 µs later, without programmatic
dependent launch's early start). The first engine of a process was slow 8 of 8 times (s19d/e), and a mode held
for hundreds of ticks. It is not a property of a loaded executable: an instance timed fast at load ran slow in
its engine and the reverse (s19f). It does follow the buffers: moving one small parameter array to a new
buffer (so XLA updates the tick's graph and its allocations land elsewhere) turned both slow engines of s20a
fast on the first move, and kept the fast one fast, over 36 moves (benchmarks/results/
2026-12-03-s20-slow-mode-redraw.md); moving every parameter and the whole state kept one slow engine slow.
So the check times the narrowest decode tick (row 0 decoding into the trash page; all-padding ticks timed
the same in both modes, s20b), moves the decode parameters' smallest array
(`Executor.move_smallest_param`), times again, and keeps moving until a timing is within MARGIN of the best
seen, after at least MIN_MOVES moves and once the timings show both modes (`settle`).

Modes: "off", "auto" (on where JAX runs on a GPU), "on" (also off GPU: the tests). DEFAULT says which one
applies without $DGJAX_GRAPH_CHECK.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable

import jax

from dgjax.pallas.launch import choose_impl

log = logging.getLogger("dgjax.graph_check")

ENV_VAR = "DGJAX_GRAPH_CHECK"
MODES = ("auto", "on", "off")
MIN_MOVES = 2  # moves before stopping is allowed
MAX_MOVES = 6
MARGIN = 0.02  # the modes differ by ~10% on qwen3-30b-a3b fp8 C1, 3-5% on llama C4 / glm; one timing by <0.5%
DEFAULT = "off"
WARM_TICKS = 3
TIMED_TICKS = 40


def enabled(mode: str | None = None) -> bool:
    chosen = choose_impl(mode, ENV_VAR, MODES, "decode graph check", default=DEFAULT)
    return chosen == "on" or (chosen == "auto" and jax.default_backend() == "gpu")


@dataclasses.dataclass
class CheckResult:
    ms_per_tick: list[float]  # the timing before any move, then after each move

    def describe(self) -> str:
        times = ", ".join(f"{t:.3f}" for t in self.ms_per_tick)
        return f"{times} ms a tick, {len(self.ms_per_tick) - 1} move(s)"


def settle(measure: Callable[[], float], move: Callable[[], None], min_moves: int = MIN_MOVES,
           max_moves: int = MAX_MOVES, margin: float = MARGIN) -> CheckResult:
    """Time (`measure()` -> ms a tick), then move and time again until at least `min_moves` moves are done, the
    timings seen differ by more than `margin` (so the best is from the faster mode: two slow draws look as even
    as two fast ones) and the last is within `margin` of the best; or until `max_moves` are spent (a GPU
    without the modes pays max_moves short timings). The graph keeps the last draw: a move cannot be undone."""
    times = [measure()]
    for moves in range(1, max_moves + 1):
        move()
        times.append(measure())
        best = min(times)
        if moves >= min_moves and max(times) > (1 + margin) * best and times[-1] <= (1 + margin) * best:
            break
    return CheckResult(times)


def time_ticks(tick: Callable[[], Any], warm: int = WARM_TICKS, timed: int = TIMED_TICKS) -> float:
    """ms a call of `tick` (which enqueues one decode tick and returns its result), `timed` calls queued back
    to back after `warm` ones, one sync at the end."""
    out = None
    for _ in range(warm):
        out = tick()
    jax.block_until_ready(out)
    t0 = time.perf_counter()
    for _ in range(timed):
        out = tick()
    jax.block_until_ready(out)
    return 1e3 * (time.perf_counter() - t0) / timed
