"""Decode executables whose CUDA graph runs in the slow mode, found at startup and loaded once more
($DGJAX_GRAPH_CHECK).

Why: on the H200 a loaded decode executable runs its CUDA graph in one of two modes for its whole life:
qwen3-30b-a3b fp8 C1 ticks of 2.65-2.70 ms or of 2.93-2.96 ms (~10%), with the same kernels. Which one is drawn
per loaded engine, not per process or per compile (benchmarks/mode_probe.py, s19d and s19e in
benchmarks/results/2026-12-03-s19-slow-mode-per-executable.md): with engines built one after another in a
process, the first was slow in 8 of 8 processes and later ones fast in 10 of 16 (all four under
CUDA_DEVICE_MAX_CONNECTIONS=32 or =1 slow), and an engine kept its mode through hundreds of ticks, in the
engine's host loop or straight from Python, with or without the per-tick result copies: the device runs the
graph slower. The ~0.28 ms a tick is ~0.35 µs on each of ~800 kernel edges, what s16 traced in slow runs
(every kernel starting after its predecessor ends instead of under programmatic dependent launch); in s19 the
slow engines ran fast under the profiler, so a trace cannot tell the modes apart here. So the check times each
decode executable on padding rows and, where loading it again gives a faster instance, keeps that one.

Policy (`pick_faster`): time the loaded instance, load another and time it; keep the faster; stop once two
instances differ by more than MARGIN (the faster one is then in the fast mode) or after ATTEMPTS instances.
Modes: "off" (default), "auto" (on where JAX runs on a GPU), "on" (also off GPU: the tests). Off by default until
timed on the H200: whether loading only the executable again (not the whole engine, as s19d/e did) draws a
fresh mode is what `benchmarks/campaign_s19f.sh` checks (no device time was left in session 19).
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
ATTEMPTS = 3  # instances at most (two extra loads)
MARGIN = 0.03  # the modes differ by ~10% on qwen3-30b-a3b fp8 C1; repeated timings of one instance by <0.5%
WARM_TICKS = 3
TIMED_TICKS = 40


def enabled(mode: str | None = None) -> bool:
    chosen = choose_impl(mode, ENV_VAR, MODES, "decode graph check", default="off")
    return chosen == "on" or (chosen == "auto" and jax.default_backend() == "gpu")


@dataclasses.dataclass
class CheckResult:
    ms_per_tick: list[float]  # every instance timed, in load order
    kept: int  # index into ms_per_tick of the instance kept

    def describe(self) -> str:
        times = ", ".join(f"{t:.3f}" for t in self.ms_per_tick)
        return f"{times} ms a tick over {len(self.ms_per_tick)} instance(s), kept #{self.kept + 1}"


def pick_faster(first: Any, load: Callable[[], Any], measure: Callable[[Any], float],
                attempts: int = ATTEMPTS, margin: float = MARGIN) -> tuple[Any, CheckResult]:
    """(the instance to keep, what was timed). `measure(instance)` -> ms a tick; `load()` -> a fresh instance.
    Two instances within `margin` of each other are taken to share a mode, and since a process's first
    instance has always been slow, an even pair loads one more (up to `attempts`); a pair that differs ends
    the search with the faster one. A losing instance is dropped at once, so at most two are alive."""
    best, best_ms = first, measure(first)
    del first  # `best` holds it while it leads
    times, kept = [best_ms], 0
    for _ in range(attempts - 1):
        other = load()
        ms = measure(other)
        times.append(ms)
        differ = abs(ms - best_ms) > margin * min(ms, best_ms)
        if ms < best_ms:
            best, best_ms, kept = other, ms, len(times) - 1
        del other
        if differ:
            break
    return best, CheckResult(times, kept)


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
