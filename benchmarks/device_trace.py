"""Device time of decode ticks read from a JAX profiler trace: busy share and kernel time per tick.

Why a trace: replaying one tick's executable with async calls (the earlier method) timed the replay's
own dispatch and read more than the engine's whole step, so "1 - device/step" came out negative. The
trace instead records every kernel the engine's own ticks ran. The steady window is cut out of it by
the decode attention kernels (one per layer per tick): it starts at the first tick after the last
prefill kernel and drops a tick at each end, so prefill and the last stream's exit are outside it. Given
`max_ticks` (the ticks every stream decodes together after the last prefill), it also ends there: streams
that were prefilled first finish first, and the ticks after that run narrower buckets (s11h: at 16 streams
6 of 28 attention calls a tick in the window had been the narrower bucket's).
Reads the Perfetto JSON trace that `jax.profiler` writes; on a CPU run there are no device events and
the stats are None.
"""

from __future__ import annotations

import dataclasses
import glob
import gzip
import json
import os
import re
import statistics
import tempfile
from collections.abc import Callable

DECODE_KERNELS = ("paged_decode_attention", "fused_decode_attention")  # one per layer per decode tick
PREFILL_KERNEL = "paged_prefill_attention"
# XLA's host-side span for re-recording a CUDA graph whose captured buffers moved (its args: num_commands);
# s15d (benchmarks/results/2026-12-02-s15-graph-scheduling-and-updates.md) found one after every decode tick.
GRAPH_UPDATE = "command_buffer::update"


def _events_and_gpu_pids(trace_path: str) -> tuple[list[dict], set]:
    """A Perfetto trace's events, and the process ids of its GPU lines."""
    with gzip.open(trace_path, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    pids = {e["pid"]: e.get("args", {}).get("name", "") for e in events
            if e.get("ph") == "M" and e.get("name") == "process_name"}
    return events, {p for p, n in pids.items() if "gpu" in n.lower() and "host" not in n.lower()}


def device_events(trace_path: str) -> list[dict]:
    """Kernel events ('X' phase) on the GPU stream lines of a Perfetto trace, sorted by start."""
    events, gpu_pids = _events_and_gpu_pids(trace_path)
    threads = {(e["pid"], e["tid"]): e.get("args", {}).get("name", "") for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    streams = {k for k, n in threads.items() if k[0] in gpu_pids and "stream" in n.lower()}
    # kernels live on the "Stream #..." lines; op-level lines would count the same time twice
    keep = (lambda e: (e["pid"], e.get("tid")) in streams) if streams else (lambda e: e["pid"] in gpu_pids)
    out = [e for e in events if e.get("ph") == "X" and e.get("pid") in gpu_pids and "dur" in e and keep(e)]
    return sorted(out, key=lambda e: e["ts"])


def host_events(trace_path: str, names: tuple[str, ...]) -> list[dict]:
    """Complete ('X') events named in `names` on the trace's non-GPU (host) lines, sorted by start."""
    events, gpu_pids = _events_and_gpu_pids(trace_path)
    out = [e for e in events if e.get("ph") == "X" and e.get("name") in names and e.get("pid") not in gpu_pids]
    return sorted(out, key=lambda e: e["ts"])


def graph_updates(host: list[dict], top: int = 3) -> list[tuple[int, int, float]]:
    """(commands, re-records, median host µs) of the `top` largest CUDA graphs re-recorded among `host`'s
    GRAPH_UPDATE events, largest first (a tick's decode graph and the prefill chunk's are the big ones)."""
    by_size: dict[int, list[float]] = {}
    for e in host:
        if e.get("name") == GRAPH_UPDATE:
            by_size.setdefault(int(e.get("args", {}).get("num_commands", 0)), []).append(e.get("dur", 0.0))
    return [(n, len(by_size[n]), statistics.median(by_size[n])) for n in sorted(by_size, reverse=True)[:top]]


def busy_us(events: list[dict], start: float, end: float) -> float:
    """Microseconds inside [start, end) during which at least one kernel ran."""
    spans = sorted((max(e["ts"], start), min(e["ts"] + e["dur"], end)) for e in events)
    total, cur_s, cur_e = 0.0, None, None
    for s, t in spans:
        if t <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, t
        else:
            cur_e = max(cur_e, t)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


@dataclasses.dataclass
class TickStats:
    ticks: int
    wall_ms_per_tick: float  # device time line per tick (kernels + gaps between them)
    busy_ms_per_tick: float  # time some kernel ran
    idle_share: float  # 1 - busy / wall inside the window
    kernels_per_tick: float
    top_kernels: list[tuple[str, float, float]] = dataclasses.field(default_factory=list)  # name, µs, calls per tick
    # Sum of the kernels' own durations per tick. Above busy when kernels overlap: a kernel launched under
    # programmatic dependent launch starts (and is timed from) before its predecessor ends. Every fast
    # qwen3-30b-a3b fp8 C1 run read 0.11-0.15 ms a tick more here than busy, every slow one ~0 (s12f).
    kernel_ms_per_tick: float | None = None
    # Where kernels overlap: (earlier family, later family, same stream, µs per tick, times per tick).
    overlaps: list[tuple[str, str, bool, float, float]] = dataclasses.field(default_factory=list)
    # Launch edges by class ("xla>xla", "xla>pallas", ...): (class, edges per tick, median gap µs, gap µs per
    # tick), the gap running from the end of the latest-ending earlier kernel to this kernel's start (negative
    # where it starts early). Whether qwen3's fast and slow modes differ on every edge or on some (s13).
    edges: list[tuple[str, float, float, float]] = dataclasses.field(default_factory=list)


def kernel_family(name: str) -> str:
    """A kernel's name without XLA's numeric suffixes, so one fusion kind repeated per layer adds up."""
    return re.sub(r"([._]\d+)+$", "", name.split("(")[0].strip())


def top_kernels(events: list[dict], ticks: int, n: int = 15) -> list[tuple[str, float, float]]:
    """The n kernel families with the most device time: (family, µs per tick, calls per tick)."""
    us: dict[str, float] = {}
    calls: dict[str, int] = {}
    for e in events:
        k = kernel_family(e["name"])
        us[k] = us.get(k, 0.0) + e["dur"]
        calls[k] = calls.get(k, 0) + 1
    ranked = sorted(us, key=us.get, reverse=True)[:n]
    return [(k, us[k] / ticks, calls[k] / ticks) for k in ranked]


def _after_latest_end(events: list[dict]):
    """(latest-ending earlier kernel, kernel) for every kernel but the first; events sorted by start."""
    last = None
    for e in events:
        if last is not None:
            yield last, e
        if last is None or e["ts"] + e["dur"] > last["ts"] + last["dur"]:
            last = e


def overlap_pairs(events: list[dict], ticks: int, n: int = 6) -> list[tuple[str, str, bool, float, float]]:
    """The n kernel-family pairs that overlap most. A kernel starting before the latest end so far overlaps
    the kernel that ends last: on the same stream that is a launch under programmatic dependent launch
    waiting for its predecessor, on another stream concurrent work. (earlier family, later family, same
    stream, µs per tick, times per tick); events sorted by start."""
    us: dict[tuple[str, str, bool], float] = {}
    count: dict[tuple[str, str, bool], int] = {}
    for last, e in _after_latest_end(events):
        if e["ts"] < last["ts"] + last["dur"]:
            key = (kernel_family(last["name"]), kernel_family(e["name"]), e.get("tid") == last.get("tid"))
            us[key] = us.get(key, 0.0) + min(last["ts"] + last["dur"], e["ts"] + e["dur"]) - e["ts"]
            count[key] = count.get(key, 0) + 1
    ranked = sorted(us, key=us.get, reverse=True)[:n]
    return [(*key, us[key] / ticks, count[key] / ticks) for key in ranked]


PALLAS_PREFIXES = ("moe_", "quant_gemv", "fused_decode_attention", "split_merge", "gemv", "add_rms_norm",
                   "paged_")  # our pallas_call names (dgjax/pallas/*/kernel.py)


def kernel_class(name: str) -> str:
    return "pallas" if name.startswith(PALLAS_PREFIXES) else "xla"


def launch_edges(events: list[dict], ticks: int) -> list[tuple[str, float, float, float]]:
    """Gaps between each kernel's start and the latest end before it, by (earlier class > later class):
    (class pair, edges per tick, median gap µs, summed gap µs per tick); events sorted by start."""
    gaps: dict[str, list[float]] = {}
    for last, e in _after_latest_end(events):
        key = f"{kernel_class(last['name'])}>{kernel_class(e['name'])}"
        gaps.setdefault(key, []).append(e["ts"] - (last["ts"] + last["dur"]))
    return [(k, len(v) / ticks, statistics.median(v), sum(v) / ticks) for k, v in sorted(gaps.items())]


EARLY_LAUNCH_US = -0.1  # below this median gap the tick's kernels launch early (s12-s19: early -0.16..-0.35, late -0.03..+0.19)


def launch_mode(edges: list[tuple[str, float, float, float]] | None) -> str | None:
    """"early" where the traced tick's kernels start before their predecessors end (programmatic dependent launch
    at work), "late" where they start after; None without edges. Read from the edge-weighted median of the
    classes' median gaps. Why: some engines run ~8-10% slower with the same kernels (s13-s19), and an A/B
    across modes measures the mode. The trace sees it only sometimes: decode_bench's slow runs traced late
    (s16-s19a), but s19d's slow engines traced early; the untraced step above the traced busy time ('idle
    share, untraced' > 0) is the other sign."""
    if not edges:
        return None
    weighted = sorted((med, n) for _, n, med, _ in edges)
    half, seen = sum(n for _, n in weighted) / 2, 0.0
    for med, n in weighted:
        seen += n
        if seen >= half:
            return "early" if med < EARLY_LAUNCH_US else "late"
    return None


def steady_tick_stats(events: list[dict], layers: int, max_ticks: int | None = None) -> TickStats | None:
    """Stats over the steady decode ticks of a trace, among the first `max_ticks` after the last prefill if
    given (None without at least 3 full decode ticks)."""
    last_prefill = max((e["ts"] + e["dur"] for e in events if PREFILL_KERNEL in e["name"]), default=None)
    attn = [e for e in events if any(k in e["name"] for k in DECODE_KERNELS)
            and (last_prefill is None or e["ts"] > last_prefill)]
    ticks = min(len(attn) // layers, max_ticks or len(attn)) - 2
    if ticks < 1:
        return None
    first, last = attn[layers], attn[layers * (ticks + 1)]  # layer 0 of the 2nd tick .. of the last-but-one
    start, end = first["ts"], last["ts"]
    inside = [e for e in events if start <= e["ts"] < end]
    wall = end - start
    busy = busy_us(inside, start, end)
    kernel_us = sum(min(e["ts"] + e["dur"], end) - e["ts"] for e in inside)
    return TickStats(ticks, wall / ticks / 1e3, busy / ticks / 1e3, 1.0 - busy / wall, len(inside) / ticks,
                     top_kernels(inside, ticks), kernel_us / ticks / 1e3, overlap_pairs(inside, ticks),
                     launch_edges(inside, ticks))


def trace_events(run: Callable[[], object], out_dir: str | None = None,
                 host_out: list[dict] | None = None) -> list[dict]:
    """Run `run()` under the JAX profiler and return its device kernel events; `host_out`, if given, is
    extended with the trace's GRAPH_UPDATE host events."""
    import jax

    trace_dir = out_dir or tempfile.mkdtemp(prefix="dgjax-trace-")
    jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
    try:
        run()
    finally:
        jax.profiler.stop_trace()
    paths = sorted(glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"), recursive=True))
    if paths and host_out is not None:
        host_out.extend(host_events(paths[-1], (GRAPH_UPDATE,)))
    return device_events(paths[-1]) if paths else []
