"""Prometheus metrics under vLLM's `vllm:` names, which existing dashboards already chart.

Latencies and token counters are measured here, where outputs arrive; queue/KV/prefix-cache figures
are read from `engine.stats()` at scrape time. Each app owns its `CollectorRegistry`, so two servers
in one process (tests) never clash.
"""

from __future__ import annotations

import time

from prometheus_client import (CollectorRegistry, Counter, Histogram, disable_created_metrics,
                               generate_latest)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from dgjax.runtime.types import RequestOutput

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# `*_created` samples double the scrape size and no dashboard reads them (vLLM turns them off too).
disable_created_metrics()

_LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                    7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
_ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
                0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000,
                  100000)


class EngineStatsCollector(Collector):
    """Reads the engine's live counters each time /metrics is scraped."""

    def __init__(self, engine, model_name: str) -> None:
        self.engine = engine
        self.model_name = model_name

    def collect(self):
        s = self.engine.stats()
        label = ["model_name"]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=label)
            g.add_metric([self.model_name], value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=label)
            c.add_metric([self.model_name], value)
            return c

        yield gauge("vllm:num_requests_running", "Requests in decode/prefill slots.", s.num_running)
        yield gauge("vllm:num_requests_waiting", "Requests waiting for a slot.", s.num_waiting)
        yield gauge("vllm:kv_cache_usage_perc", "Fraction of KV-cache pages in use (1 = full).",
                    s.kv_usage)
        yield counter("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.",
                      s.prefix_cache_queries)
        yield counter("vllm:prefix_cache_hits", "Prompt tokens served from the prefix cache.",
                      s.prefix_cache_hits)
        yield counter("vllm:num_preemptions", "Requests preempted to free KV pages.",
                      s.num_preemptions)


class ServingMetrics:
    def __init__(self, engine, model_name: str) -> None:
        self.registry = CollectorRegistry()
        self.model_name = model_name
        labels = ["model_name"]
        r = self.registry

        def hist(name: str, doc: str, buckets) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=r).labels(model_name)

        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prefilled prompt tokens.", labels,
                                     registry=r).labels(model_name)
        self.generation_tokens = Counter("vllm:generation_tokens", "Generated tokens.", labels,
                                         registry=r).labels(model_name)
        self._success = Counter("vllm:request_success", "Finished requests by finish reason.",
                                labels + ["finished_reason"], registry=r)
        self.ttft = hist("vllm:time_to_first_token_seconds", "Time to first token.",
                         _LATENCY_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", "Time between output tokens.",
                        _ITL_BUCKETS)
        self.e2e = hist("vllm:e2e_request_latency_seconds", "Arrival to last token.",
                        _LATENCY_BUCKETS)
        self.tpot = hist("vllm:request_time_per_output_token_seconds",
                         "Mean time per output token after the first, per request.", _ITL_BUCKETS)
        self.request_prompt_tokens = hist("vllm:request_prompt_tokens",
                                          "Prompt length per request.", _TOKEN_BUCKETS)
        self.request_generation_tokens = hist("vllm:request_generation_tokens",
                                              "Generated tokens per request.", _TOKEN_BUCKETS)
        r.register(EngineStatsCollector(engine, model_name))

    def success(self, finish_reason: str) -> None:
        self._success.labels(self.model_name, finish_reason).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class RequestTimer:
    """Per engine request: turns the stream of outputs into latency and token observations."""

    def __init__(self, metrics: ServingMetrics) -> None:
        self.metrics = metrics
        self.arrival = 0.0
        self.prompt_len = 0
        self.first_token: float | None = None
        self.last_token = 0.0
        self.generated = 0
        self.prompt_counted = False

    def start(self, arrival: float, prompt_len: int) -> None:
        self.arrival = arrival
        self.prompt_len = prompt_len

    def observe(self, out: RequestOutput) -> None:
        m = self.metrics
        now = time.monotonic()
        if not self.prompt_counted:
            self.prompt_counted = True
            m.prompt_tokens.inc(out.num_prompt_tokens or self.prompt_len)
        k = len(out.token_ids)
        if k:
            if self.first_token is None:
                self.first_token = now
                m.ttft.observe(now - self.arrival)
                gaps, step = 0, 0.0
            else:
                gaps, step = k, (now - self.last_token) / k
            for _ in range(gaps):
                m.itl.observe(step)
            self.last_token = now
            self.generated += k
            m.generation_tokens.inc(k)
        if out.finished:
            m.e2e.observe(now - self.arrival)
            reason = out.finish_reason.value if out.finish_reason is not None else "abort"
            m.success(reason)
            m.request_prompt_tokens.observe(out.num_prompt_tokens or self.prompt_len)
            m.request_generation_tokens.observe(self.generated)
            if self.first_token is not None and self.generated > 1:
                m.tpot.observe((self.last_token - self.first_token) / (self.generated - 1))
