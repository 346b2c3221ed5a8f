"""DGJAX_GRAPH_CHECK: at startup every decode executable is timed on padding rows and, where a freshly loaded
instance runs faster, replaced by it; the choice follows the timings, and the check changes no token."""

from __future__ import annotations

import pytest

from benchmarks.engine_runs import executor_of
from dgjax.llm import LLM
from dgjax.runtime import graph_check
from dgjax.runtime.types import SamplingParams

from engine_harness import MODEL_DIR, small_engine_config

PROMPTS = ["The with statement", "import", "def main():"]


class Loads:
    """Instances named by load order, each with a fixed tick time from `times`."""

    def __init__(self, times):
        self.times, self.loaded = list(times), 0

    def load(self):
        self.loaded += 1
        return self.loaded

    def measure(self, instance):
        return self.times[instance]


@pytest.mark.parametrize("times, kept, timed", [
    ([2.95, 2.68, 2.66], 1, 2),  # a slow first instance, a fast reload: done after one reload
    ([2.68, 2.95, 2.96], 0, 2),  # the first was fast: the slower reload is dropped
    ([2.95, 2.94, 2.67], 2, 3),  # an even pair (both slow) loads a third
    ([2.70, 2.69, 2.70], 1, 3),  # all even: every attempt spent, the fastest kept
])
def test_pick_faster_keeps_the_fastest_and_stops_once_two_differ(times, kept, timed):
    loads = Loads(times)
    best, result = graph_check.pick_faster(0, loads.load, loads.measure, attempts=3, margin=0.03)
    assert best == kept and result.kept == kept
    assert result.ms_per_tick == times[:timed] and loads.loaded == timed - 1
    assert f"kept #{kept + 1}" in result.describe()


def test_time_ticks_counts_only_the_timed_calls():
    calls = []
    ms = graph_check.time_ticks(lambda: calls.append(1) or 0, warm=2, timed=5)
    assert len(calls) == 7 and ms >= 0


def test_unknown_mode_is_refused_by_name(monkeypatch):
    monkeypatch.setenv(graph_check.ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match="DGJAX_GRAPH_CHECK"):
        graph_check.enabled()


def _generate(monkeypatch, mode: str):
    monkeypatch.setenv(graph_check.ENV_VAR, mode)
    cfg = small_engine_config(decode_buckets=(1, 4), prefill_buckets=(16,))
    with LLM(MODEL_DIR, cfg) as llm:
        out = llm.generate(PROMPTS, SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True, logprobs=2))
        return llm.engine.graph_check, executor_of(llm.engine), [(o.token_ids, [t.logprob for t in o.logprobs])
                                                                 for o in out]


def test_the_check_times_every_decode_executable_and_changes_no_token(monkeypatch):
    report, executor, on = _generate(monkeypatch, "on")
    assert sorted(report) == sorted(f"decode[B={w},top={k}]" for w, k in executor._decode)
    assert all("ms a tick" in line for line in report.values())
    off_report, _, off = _generate(monkeypatch, "off")
    assert off_report == {}
    assert [ids for ids, _ in on] == [ids for ids, _ in off]
    flat = [[x for _, lp in run for x in lp] for run in (on, off)]
    assert flat[0] == pytest.approx(flat[1], abs=1e-6)


def test_off_by_default_until_timed_on_the_gpu(monkeypatch):
    monkeypatch.delenv(graph_check.ENV_VAR, raising=False)
    assert not graph_check.enabled()
    assert graph_check.enabled("on") and not graph_check.enabled("off")
