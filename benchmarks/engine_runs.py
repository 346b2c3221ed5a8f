"""Decode and prefill measured through the real engine: scheduler, executor, sampler, output callbacks.

Requests go through `Engine.submit` exactly as the server's do; the only instrumentation is a wrapper
around the engine's decode dispatch that records when each tick starts and with how many rows (dispatch
intervals are a cross-check of the callback timings). Device time
per tick comes from a profiler trace instead (benchmarks/device_trace.py).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable

import numpy as np

from benchmarks.traces import StreamTrace, SteadyWindow, steady_window
from dgjax.config import EngineConfig
from dgjax.runtime.engine import Engine
from dgjax.runtime.types import FinishReason, GenerationRequest, SamplingParams

WARMUP_PROMPT_TOKENS = 16
WARMUP_MAX_TOKENS = 4


def round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def decode_max_tokens(context: int, concurrency: int, decode_tokens: int, chunk: int) -> int:
    """Tokens per stream so that all `concurrency` streams decode together for `decode_tokens` ticks:
    the first stream decodes one token per prefill chunk of the streams behind it."""
    return decode_tokens + concurrency * math.ceil(context / chunk) + 1


@dataclasses.dataclass
class EnginePlan:
    """One engine to build, and the measurements it serves."""

    max_model_len: int
    num_pages: int
    max_concurrency: int
    decode_buckets: tuple[int, ...]
    decode_cases: list[tuple[int, int]]  # (context, concurrency)
    prefill_cases: list[int]  # prompt tokens
    reference: bool = False  # run through the plain-jnp path (decode_bench --reference)


def plan_engines(contexts: list[int], concurrency: list[int], prefills: list[int], *, decode_tokens: int,
                 chunk: int, page_size: int, replay_steps: int, split: bool) -> list[EnginePlan]:
    """As few engines as possible: one, or with `split` a decode engine whose block tables span only
    the decode contexts plus a prefill-only engine for the prompts that do not fit it."""
    cases = [(c, n) for c in contexts for n in concurrency]
    decode_len = max((c + decode_max_tokens(c, n, decode_tokens, chunk) + replay_steps for c, n in cases),
                     default=0)
    prefill_len = max((p + 1 for p in prefills), default=0)
    warm_len = WARMUP_PROMPT_TOKENS + WARMUP_MAX_TOKENS
    if not split or not cases:
        groups = [(max(decode_len, prefill_len, warm_len), cases, list(prefills))]
    else:
        first_len = max(decode_len, warm_len)
        near = [p for p in prefills if p + 1 <= round_up(first_len, page_size)]
        far = [p for p in prefills if p not in near]
        groups = [(first_len, cases, near)]
        if far:
            groups.append((max(p + 1 for p in far), [], far))
    plans = []
    for length, dcases, pcases in groups:
        mml = round_up(length, page_size)
        widths = sorted({n for _, n in dcases}) or [1]
        pages = [math.ceil(mml / page_size), math.ceil(warm_len / page_size)]
        pages += [n * math.ceil((c + decode_max_tokens(c, n, decode_tokens, chunk)) / page_size) for c, n in dcases]
        pages += [math.ceil((p + 1) / page_size) for p in pcases]
        plans.append(EnginePlan(mml, max(pages) + 2, widths[-1], tuple(widths), dcases, pcases))
    return plans


def engine_config(plan: EnginePlan, *, dtype: str, page_size: int, chunk: int, seed: int,
                  kv_cache_dtype: str = "auto", quantize: str = "none") -> EngineConfig:
    return EngineConfig(
        dtype=dtype, kv_cache_dtype=kv_cache_dtype, quantize=quantize, load_format="dummy", max_model_len=plan.max_model_len,
        max_concurrency=plan.max_concurrency, page_size=page_size, num_pages=plan.num_pages,
        decode_buckets=plan.decode_buckets, prefill_buckets=(chunk,), enable_prefix_cache=False,
        aot_logprob_variants=False, seed=seed,
    )


def executor_of(engine: Engine):
    """The engine's executor (the engine exposes no public handle to it)."""
    loaded = getattr(engine, "_loaded", None)
    if loaded is None:
        raise RuntimeError("the engine is not loaded, or its internals changed: no `_loaded.executor`")
    return loaded.executor


class DecodeRecorder:
    """Wraps the engine's decode dispatch: the time and row count of every decode tick it starts.

    It counts the rows from the engine's row list, never from the tick's arguments: those are device arrays
    (the engine keeps them on the device between ticks), and reading one back, as this recorder once did
    with `active`, is a device-to-host copy per tick that the engine itself never makes."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.executor = executor_of(engine)
        self.original = engine._dispatch_decode
        self.dispatches: list[tuple[float, int, float]] = []  # (start time, active rows, seconds inside)
        engine._dispatch_decode = self

    def __call__(self, rows):
        start = time.perf_counter()
        out = self.original(rows)
        self.dispatches.append((start, len(rows), time.perf_counter() - start))
        return out

    def detach(self) -> None:
        """Undo the wrap (the wrapper would otherwise keep the engine in a reference cycle)."""
        del self.engine._dispatch_decode

    def reset(self) -> None:
        self.dispatches = []

    def tick_ms(self, start: float, end: float, rows: int) -> float | None:
        """Median interval between consecutive dispatches of `rows`-row ticks inside [start, end]."""
        ts = [t for t, n, _ in self.dispatches if start <= t <= end and n == rows]
        gaps = np.diff(ts)
        return float(1e3 * np.median(gaps)) if len(gaps) else None

    def dispatch_host_ms(self, start: float, end: float, rows: int) -> float | None:
        """Median host time inside the engine's decode dispatch (layout, sampling tensors, the executable call
        until it returns) for `rows`-row ticks inside [start, end]. A tick interval well above the device
        time with this flat points at the rest of the loop (waiting on and processing the previous tick)."""
        spent = [d for t, n, d in self.dispatches if start <= t <= end and n == rows]
        return float(1e3 * np.median(spent)) if spent else None


class BenchEngine:
    """An engine on random weights plus the recorder; `close()` frees its device memory."""

    def __init__(self, model_dir: str, config: EngineConfig, log: Callable[[str], None]):
        t0 = time.perf_counter()
        self.engine = Engine(model_dir, config)
        self.engine.start(progress=log)
        self.startup_s = time.perf_counter() - t0
        self.compile_summary = dict(self.engine.compile_summary)
        self.recorder = DecodeRecorder(self.engine)
        self.config = config
        self.max_model_len = self.engine.max_model_len
        self.vocab = self.engine.model_config.vocab_size
        self._ids = 0

    def close(self) -> None:
        """Stop the engine and drop every reference to its device arrays (the recorder's wrapper
        would otherwise keep the executor in a reference cycle until the next garbage collection)."""
        self.engine.shutdown()
        self.recorder.detach()
        self.recorder = None
        self.engine = None

    def _submit(self, prompt: list[int], max_tokens: int) -> StreamTrace:
        trace = StreamTrace()
        params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        self._ids += 1
        trace.submitted = time.perf_counter()
        self.engine.submit(GenerationRequest(f"bench-{self._ids}", prompt, params), trace)
        return trace

    def _wait(self, traces: list[StreamTrace], max_tokens: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for t in traces:
            while not t.done.wait(1.0):
                thread = getattr(self.engine, "_thread", None)
                if thread is not None and not thread.is_alive():
                    raise RuntimeError("the engine loop died (its log above says why)")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"requests did not finish within {timeout_s:.0f} s")
        for t in traces:
            if t.error or t.finish_reason != FinishReason.LENGTH or t.num_tokens != max_tokens:
                raise RuntimeError(
                    f"a request ended with {t.finish_reason} after {t.num_tokens}/{max_tokens} tokens "
                    f"(error: {t.error})"
                )

    def prompts(self, rng: np.random.Generator, n: int, length: int) -> list[list[int]]:
        """Distinct random prompts over the model's whole vocabulary."""
        return [rng.integers(0, self.vocab, size=length).tolist() for _ in range(n)]

    def warmup(self, rng: np.random.Generator, timeout_s: float) -> None:
        traces = [self._submit(p, WARMUP_MAX_TOKENS) for p in self.prompts(rng, 1, WARMUP_PROMPT_TOKENS)]
        self._wait(traces, WARMUP_MAX_TOKENS, timeout_s)

    def decode(self, rng: np.random.Generator, context: int, concurrency: int, max_tokens: int,
               timeout_s: float) -> tuple[SteadyWindow, list[StreamTrace], float | None]:
        """Run `concurrency` streams with `context`-token prompts; the steady window and dispatch tick."""
        self.recorder.reset()
        traces = [self._submit(p, max_tokens) for p in self.prompts(rng, concurrency, context)]
        self._wait(traces, max_tokens, timeout_s)
        window = steady_window(traces, context)
        return window, traces, self.recorder.tick_ms(window.start, window.end, concurrency)

    def prefill(self, rng: np.random.Generator, prompt_tokens: int, timeout_s: float) -> StreamTrace:
        """One cold prompt (prefix cache off, fresh random ids) generating one token: its TTFT."""
        trace = self._submit(self.prompts(rng, 1, prompt_tokens)[0], 1)
        self._wait([trace], 1, timeout_s)
        return trace
