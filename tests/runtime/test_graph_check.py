"""DGJAX_GRAPH_CHECK: at startup the narrowest decode tick (one working row, in the trash page) is timed and a parameter buffer moved
until a timing is close to the best seen; the search follows the timings, and the moves change no token."""

from __future__ import annotations

import pytest

from benchmarks.engine_runs import executor_of
from dgjax.llm import LLM
from dgjax.runtime import flat_call, graph_check
from dgjax.runtime.types import SamplingParams

from engine_harness import MODEL_DIR, small_engine_config

PROMPTS = ["The with statement", "import", "def main():"]


class Draws:
    """A tick time per draw: `times[0]` before any move, `times[n]` after the n-th move."""

    def __init__(self, times):
        self.times, self.moves = list(times), 0

    def move(self):
        self.moves += 1

    def measure(self):
        return self.times[self.moves]


@pytest.mark.parametrize("times, moves", [
    ([2.95, 2.68, 2.67], 2),  # slow, then fast draws: stops after the minimum of two moves
    ([2.95, 2.94, 2.95, 2.67], 3),  # three even (slow) timings prove no mode is the faster: one more
    ([2.95, 2.67, 2.94, 2.95, 2.68], 4),  # a slow draw after a fast one: moves on until a draw is near the best
    ([2.95, 2.67, 2.94, 2.94, 2.94, 2.94, 2.94], 6),  # never near the best again: every move spent
    ([2.68] * 7, 6),  # one mode only (fast from the start, or a GPU without modes): every move spent
])
def test_settle_moves_until_a_timing_is_near_the_best(times, moves):
    draws = Draws(times)
    result = graph_check.settle(draws.measure, draws.move, min_moves=2, max_moves=6, margin=0.02)
    assert draws.moves == moves and result.ms_per_tick == times[:moves + 1]
    assert result.describe().endswith(f"{moves} move(s)")


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


def test_the_check_moves_a_parameter_keeps_flat_calls_and_changes_no_token(monkeypatch):
    report, executor, on = _generate(monkeypatch, "on")
    (name, line), = report.items()
    assert name == f"decode[B={min(w for w, k in executor._decode if k == 0)},top=0]" and "move(s)" in line and int(line.split(", ")[-1].split()[0]) >= 2
    assert all(exe._fixed is executor.call_params for exe in executor._decode.values()
               if isinstance(exe, flat_call.FlatCall))
    assert all(exe.fallbacks == 0 for exe in executor._decode.values() if isinstance(exe, flat_call.FlatCall))
    off_report, _, off = _generate(monkeypatch, "off")
    assert off_report == {}
    assert [ids for ids, _ in on] == [ids for ids, _ in off]
    flat = [[x for _, lp in run for x in lp] for run in (on, off)]
    assert flat[0] == pytest.approx(flat[1], abs=1e-6)


def test_off_by_default(monkeypatch):
    monkeypatch.delenv(graph_check.ENV_VAR, raising=False)
    assert graph_check.enabled() == (graph_check.DEFAULT == "on")
    assert graph_check.enabled("on") and not graph_check.enabled("off")
