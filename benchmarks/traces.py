"""Per-request output timestamps, and the steady decode window read from them.

Every engine output callback is stamped on arrival. With C streams submitted together, prefills run
one chunk per engine iteration (interleaved with the decode ticks of streams already started), so the
streams start decoding at different times. The steady window runs from the last stream's first token
(every prefill done) to the first stream's last token (no stream finished yet): inside it each tick
decodes all C streams and nothing else, which is the decode throughput the benchmark reports.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
import threading
import time

from dgjax.runtime.types import RequestOutput


class StreamTrace:
    """The `on_output` callback of one request: (arrival time, tokens generated so far) per output."""

    def __init__(self) -> None:
        self.submitted = 0.0
        self.times: list[float] = []
        self.counts: list[int] = []
        self.token_ids: list[int] = []  # everything generated, to compare runs of one seed (greedy_fingerprint)
        self.finish_reason = None
        self.error: str | None = None
        self.done = threading.Event()

    def __call__(self, out: RequestOutput) -> None:
        now = time.perf_counter()
        if out.token_ids:
            self.times.append(now)
            self.counts.append(out.num_generated_tokens)
            self.token_ids.extend(out.token_ids)
        if out.finished:
            self.finish_reason, self.error = out.finish_reason, out.error
            self.done.set()

    @property
    def num_tokens(self) -> int:
        return self.counts[-1] if self.counts else 0

    @property
    def ttft_s(self) -> float:
        return self.times[0] - self.submitted


@dataclasses.dataclass
class SteadyWindow:
    start: float  # the last stream's first token
    end: float  # the first stream's last token
    tokens: list[int]  # per stream: outputs inside [start, end]
    step_s: list[float]  # per stream: time between its first and last output inside, per interval
    mean_context: float  # mean over those outputs of the KV length the producing step attended to

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def ms_per_step(self) -> float:
        """One decode tick: the median over streams of each stream's own token interval (each stream
        is stamped at a fixed place in the tick's result loop, so its intervals are whole ticks)."""
        return 1e3 * statistics.median(self.step_s)

    @property
    def per_stream_tok_s(self) -> float:
        return 1e3 / self.ms_per_step

    @property
    def aggregate_tok_s(self) -> float:
        """Every stream gets one token per tick inside the window."""
        return len(self.tokens) * self.per_stream_tok_s


def greedy_fingerprint(traces: list[StreamTrace]) -> str:
    """A short hash of every stream's generated ids, in submission order. Runs of one seed and preset make the
    same prompts and (greedy, deterministic kernels) the same tokens, so an A/B whose arms disagree here
    changed the results, not only the speed (a race, or a different rounding path)."""
    return hashlib.sha1(json.dumps([t.token_ids for t in traces]).encode()).hexdigest()[:12]


def steady_window(traces: list[StreamTrace], prompt_len: int) -> SteadyWindow:
    """The window where every stream decodes (see the module docstring).

    Output m (m tokens generated) of a stream with a `prompt_len` prompt came from a decode step that
    fed token m-1 at position prompt_len + m - 2, attending to prompt_len + m - 1 keys.
    """
    if any(len(t.times) < 2 for t in traces):
        raise ValueError("every stream needs at least two outputs to time its decode")
    start = max(t.times[0] for t in traces)
    end = min(t.times[-1] for t in traces)
    tokens, steps, contexts = [], [], []
    for t in traces:
        inside = [(when, c) for when, c in zip(t.times, t.counts) if start <= when <= end]
        if len(inside) < 3:
            raise ValueError(
                "no steady decode window: the first stream finished before the last one started "
                "(raise the number of decode tokens)"
            )
        tokens.append(len(inside))
        steps.append((inside[-1][0] - inside[0][0]) / (inside[-1][1] - inside[0][1]))
        contexts += [prompt_len + c - 1 for _, c in inside]
    return SteadyWindow(start, end, tokens, steps, sum(contexts) / len(contexts))
