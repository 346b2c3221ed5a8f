"""The GPU benchmark harness, end to end on the CPU with the `tiny` preset: it runs through the real
engine, writes the dated markdown and the JSON, and every number in them is positive and finite."""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import subprocess
import sys

import jax
import pytest

from benchmarks.engine_runs import decode_max_tokens
from benchmarks.presets import PRESETS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTEXTS, CONCURRENCY, PREFILL, DECODE_TOKENS, CHUNK = [32, 64], [1, 2], [64], 8, 32


def positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_tiny_preset_writes_markdown_and_json_with_finite_numbers(tmp_path):
    args = [
        sys.executable, "-m", "benchmarks.decode_bench", "--preset", "tiny",
        "--contexts", ",".join(map(str, CONTEXTS)), "--concurrency", ",".join(map(str, CONCURRENCY)),
        "--prefill", ",".join(map(str, PREFILL)), "--decode-tokens", str(DECODE_TOKENS),
        "--prefill-chunk", str(CHUNK), "--reference",
        "--out", str(tmp_path),
    ]
    env = dict(os.environ, JAX_PLATFORMS="cpu", DGJAX_MOE_FP8_WIDE="on")  # a switch the files must name
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    stem = tmp_path / f"{datetime.date.today().isoformat()}-tiny-cpu"
    md, raw = stem.with_suffix(".md").read_text(), json.loads(stem.with_suffix(".json").read_text())
    assert raw["machine"]["jax"] == jax.__version__ and "--preset tiny" in raw["command"]
    assert raw["command"] in md and jax.__version__ in md
    assert raw["machine"]["environment"]["DGJAX_MOE_FP8_WIDE"] == "on" and "`DGJAX_MOE_FP8_WIDE=on`" in md
    assert positive(raw["ceiling"]["read_bytes_per_s"]) and positive(raw["ceiling"]["read_end_bytes_per_s"])
    assert positive(raw["ceiling"]["matmul_flops_per_s"])

    cases = sorted((d["context"], d["concurrency"]) for d in raw["decode"])
    assert cases == sorted((c, n) for c in CONTEXTS for n in CONCURRENCY)
    kv_per_token = 2 * 2 * PRESETS["tiny"]["num_hidden_layers"] * PRESETS["tiny"]["num_key_value_heads"] \
        * PRESETS["tiny"]["head_dim"]
    for d in raw["decode"]:
        for key in ("ms_per_step", "tok_s_per_stream", "tok_s_aggregate", "bytes_per_step", "bytes_per_s",
                    "frac_ceiling", "roofline_ms", "mean_context", "dispatch_ms_per_tick", "host_ms_per_dispatch"):
            assert positive(d[key]), (key, d)
        assert d["host_ms_per_dispatch"] < d["dispatch_ms_per_tick"]  # a part of the tick interval
        assert d["warm_s"] == 1.0 and set(d["clocks_mhz"]) == {"before", "after"}  # None without nvidia-smi
        # device time comes from a profiler trace of GPU kernels: none on the CPU
        assert d["device_ms_per_step"] is None and d["idle_share"] is None and d["untraced_idle_share"] is None
        assert d["max_tokens"] == decode_max_tokens(d["context"], d["concurrency"], DECODE_TOKENS, CHUNK)
        # every stream decoded together for at least the requested ticks, past the prompt
        assert sorted(d["window_tokens"])[len(d["window_tokens"]) // 2] >= DECODE_TOKENS
        assert d["context"] < d["mean_context"] < d["context"] + d["max_tokens"]
        assert d["kv_bytes"] == pytest.approx(kv_per_token * d["mean_context"] * d["concurrency"])
        assert d["tok_s_aggregate"] == pytest.approx(d["tok_s_per_stream"] * d["concurrency"])
        assert d["bytes_per_s"] == pytest.approx(d["bytes_per_step"] / (d["ms_per_step"] / 1e3))
        assert d["frac_ceiling"] == pytest.approx(d["bytes_per_s"] / raw["ceiling"]["read_bytes_per_s"])
        # every stream's generated ids, and their fingerprint in both files (A/B arms compare it)
        assert [len(ids) for ids in d["greedy_tokens"]] == [d["max_tokens"]] * d["concurrency"]
        assert d["greedy_sha1"] == hashlib.sha1(json.dumps(d["greedy_tokens"]).encode()).hexdigest()[:12]
        assert f"{d['context']} x {d['concurrency']}: `{d['greedy_sha1']}`" in md

    ref_cases = sorted((d["context"], d["concurrency"]) for d in raw["reference"])
    assert ref_cases == [(CONTEXTS[0], 1), (CONTEXTS[0], max(CONCURRENCY))]
    assert all(positive(d["tok_s_aggregate"]) for d in raw["reference"])
    assert "## Reference path" in md
    assert f"context {CONTEXTS[0]}, 1 streams: kernels" in md

    (p,) = raw["prefill"]
    assert p["prompt_tokens"] == PREFILL[0] and p["chunks"] == math.ceil(PREFILL[0] / CHUNK)
    for key in ("ttft_s", "tok_s", "ms_per_chunk", "flops", "flops_per_s", "frac_matmul"):
        assert positive(p[key]), (key, p)
    assert "## Decode" in md and "## Cold prefill" in md and "SM MHz before / after" in md
    tail = proc.stdout[proc.stdout.rindex("read ceiling at the end"):]  # the table comes last
    assert "ms/step" in tail and "TTFT" in tail


def test_greedy_fingerprint_follows_every_id_and_the_stream_order():
    from benchmarks.traces import StreamTrace, greedy_fingerprint

    def streams(*ids):
        out = []
        for s in ids:
            t = StreamTrace()
            t.token_ids = list(s)
            out.append(t)
        return out

    base = greedy_fingerprint(streams([1, 2, 3], [4, 5]))
    assert base == greedy_fingerprint(streams([1, 2, 3], [4, 5])) and len(base) == 12
    assert base != greedy_fingerprint(streams([1, 2, 3], [4, 6]))
    assert base != greedy_fingerprint(streams([4, 5], [1, 2, 3]))
    assert base != greedy_fingerprint(streams([1, 2], [3, 4, 5]))  # where one stream ends matters


def test_greedy_diff_reports_where_each_stream_parts(tmp_path):
    from benchmarks.greedy_diff import first_difference, main

    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1 and first_difference([1, 2], [1, 2, 3]) == 2

    def run(name, streams, context=1024):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"decode": [{"context": context, "concurrency": len(streams),
                                                "greedy_tokens": streams}]}))
        return str(path)

    a = run("a", [[1, 2, 3, 4], [5, 6, 7, 8]])
    b = run("b", [[1, 2, 3, 4], [5, 6, 9, 8]])
    c = run("c", [[0, 2, 3, 4], [5, 6, 7, 8]])
    rows = main([a, b, c])
    assert [(r["run"], r["first_difference"]) for r in rows] == [(1, [None, 2]), (2, [0, None])]
    assert rows[0]["tokens"] == 4 and rows[0]["context"] == 1024
