"""Per-request output timestamps, and the steady decode window read from them.

Every engine output callback is stamped on arrival. With C streams submitted together, prefills run
one chunk per engine iteration (interleaved with the decode ticks of streams already started), so the
streams start decoding at different times. The steady window runs from the last stream's first token
(every prefill done) to the first stream's last token (no stream finished yet): inside it each tick
decodes all C streams and nothing else, which is the decode throughput the benchmark reports.
"""

from __future__ import annotations

import dataclasses
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
        self.finish_reason = None
        self.error: str | None = None
        self.done = threading.Event()

    def __call__(self, out: RequestOutput) -> None:
        now = time.perf_counter()
        if out.token_ids:
            self.times.append(now)
            self.counts.append(out.num_generated_tokens)
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
    tokens: list[int]  # per stream: outputs inside (start, end]
    mean_context: float  # mean over those outputs of the KV length the producing step attended to

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def ms_per_step(self) -> float:
        """Wall time of one decode tick, from the stream with the median token count in the window."""
        return 1e3 * self.seconds / statistics.median(self.tokens)

    @property
    def aggregate_tok_s(self) -> float:
        return sum(self.tokens) / self.seconds

    @property
    def per_stream_tok_s(self) -> float:
        return self.aggregate_tok_s / len(self.tokens)


def steady_window(traces: list[StreamTrace], prompt_len: int) -> SteadyWindow:
    """The window where every stream decodes (see the module docstring).

    Output m (m tokens generated) of a stream with a `prompt_len` prompt came from a decode step that
    fed token m-1 at position prompt_len + m - 2, attending to prompt_len + m - 1 keys.
    """
    if any(len(t.times) < 2 for t in traces):
        raise ValueError("every stream needs at least two outputs to time its decode")
    start = max(t.times[0] for t in traces)
    end = min(t.times[-1] for t in traces)
    tokens, contexts = [], []
    for t in traces:
        inside = [c for when, c in zip(t.times, t.counts) if start < when <= end]
        tokens.append(len(inside))
        contexts += [prompt_len + c - 1 for c in inside]
    if end <= start or min(tokens) == 0:
        raise ValueError(
            "no steady decode window: the first stream finished before the last one started "
            "(raise the number of decode tokens)"
        )
    return SteadyWindow(start, end, tokens, sum(contexts) / len(contexts))
