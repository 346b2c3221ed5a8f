"""Steady-tick statistics from a device trace (benchmarks/device_trace.py) on constructed kernel timelines."""

from __future__ import annotations

import pytest

from benchmarks.device_trace import busy_us, kernel_family, steady_tick_stats


def _timeline(ticks: int, layers: int, gemm_us: float, attn_us: float, gap_us: float, host_wait_us: float,
              attn_name: str = "paged_decode_attention_g16"):
    """A prefill kernel, then `ticks` decode ticks of per layer (gemm, attention), `gap_us` between
    kernels and `host_wait_us` idle at the end of each tick."""
    events, t = [{"name": "paged_prefill_attention_g4", "ts": 0.0, "dur": 50.0}], 60.0
    for _ in range(ticks):
        for _ in range(layers):
            for name, dur in (("gemm_fusion_dot_1", gemm_us), (attn_name, attn_us)):
                events.append({"name": name, "ts": t, "dur": dur})
                t += dur + gap_us
        t += host_wait_us
    return events


@pytest.mark.parametrize("attn_name", ["paged_decode_attention_g16_d128", "fused_decode_attention_g16_d128"])
def test_steady_ticks_measure_busy_time_and_idle_share(attn_name):
    layers, gemm, attn, gap, wait = 4, 10.0, 2.0, 1.0, 8.0
    stats = steady_tick_stats(_timeline(10, layers, gemm, attn, gap, wait, attn_name), layers)
    tick_wall = layers * (gemm + attn + 2 * gap) + wait
    tick_busy = layers * (gemm + attn)
    assert stats.ticks == 8
    assert stats.wall_ms_per_tick == pytest.approx(tick_wall / 1e3)
    assert stats.busy_ms_per_tick == pytest.approx(tick_busy / 1e3)
    assert stats.idle_share == pytest.approx(1 - tick_busy / tick_wall)
    assert stats.kernels_per_tick == pytest.approx(2 * layers)


def test_too_few_ticks_give_none_and_overlaps_count_once():
    assert steady_tick_stats(_timeline(2, 4, 10, 2, 1, 0), 4) is None
    overlapping = [{"ts": 0.0, "dur": 10.0}, {"ts": 5.0, "dur": 10.0}, {"ts": 30.0, "dur": 5.0}]
    assert busy_us(overlapping, 0.0, 40.0) == pytest.approx(20.0)
    assert busy_us(overlapping, 8.0, 32.0) == pytest.approx(9.0)


def test_kernel_breakdown_sums_per_tick_by_family():
    layers, gemm, attn = 4, 10.0, 2.0
    stats = steady_tick_stats(_timeline(10, layers, gemm, attn, 1.0, 8.0), layers)
    names = {name: (us, calls) for name, us, calls in stats.top_kernels}
    assert names["gemm_fusion_dot"] == (pytest.approx(layers * gemm), pytest.approx(layers))
    assert names["paged_decode_attention_g16"] == (pytest.approx(layers * attn), pytest.approx(layers))
    assert [n for n, _, _ in stats.top_kernels][0] == "gemm_fusion_dot"  # ranked by time
    assert kernel_family("input_fusion.12") == "input_fusion"
    assert kernel_family("loop_add_fusion_3.1") == "loop_add_fusion"


def test_max_ticks_ends_the_window_before_streams_drop_out():
    """After `max_ticks` full ticks the streams prefilled first finish and narrower ticks follow (here: half the
    gemm time, another attention kernel); the window stops before them."""
    layers = 4
    full = _timeline(6, layers, 10.0, 2.0, 1.0, 8.0, "fused_decode_attention_g16_d128_s3")
    t = full[-1]["ts"] + 20.0
    for _ in range(5):
        for _ in range(layers):
            for name, dur in (("gemm_fusion_dot_1", 5.0), ("fused_decode_attention_g16_d128_s6", 2.0)):
                full.append({"name": name, "ts": t, "dur": dur})
                t += dur + 1.0
        t += 8.0
    mixed = steady_tick_stats(full, layers)
    steady = steady_tick_stats(full, layers, max_ticks=6)
    assert mixed.ticks == 9 and steady.ticks == 4
    assert steady.busy_ms_per_tick == pytest.approx(layers * 12.0 / 1e3)
    assert mixed.busy_ms_per_tick < steady.busy_ms_per_tick
    assert {n for n, _, _ in steady.top_kernels} == {"gemm_fusion_dot", "fused_decode_attention_g16_d128_s3"}


def test_kernel_time_exceeds_busy_time_by_the_overlap_of_early_launched_kernels():
    """Each attention kernel starts 1.5 µs before its gemm ends (as under programmatic dependent launch): busy
    time counts that once, the kernels' summed time twice; without overlap the two agree. The report prints
    the difference."""
    from benchmarks.report import _overlap

    layers = 4
    plain = steady_tick_stats(_timeline(10, layers, 10.0, 2.0, 1.0, 8.0), layers)
    assert plain.kernel_ms_per_tick == pytest.approx(plain.busy_ms_per_tick)
    early = _timeline(10, layers, 10.0, 2.0, 1.0, 8.0)
    for e in early:
        if "decode_attention" in e["name"]:
            e["ts"] -= 2.5  # 1 µs gap before, now 1.5 µs inside the gemm
    stats = steady_tick_stats(early, layers)
    # every overlap inside the window counts: the window opens at an attention kernel, so the one gemm that
    # began before it (and overlaps it) is outside
    overlaps = stats.ticks * layers - 1
    assert stats.kernel_ms_per_tick - stats.busy_ms_per_tick == pytest.approx(overlaps * 1.5 / stats.ticks / 1e3)
    shown = _overlap({"kernel_ms_per_tick": 2.96, "busy_ms_per_tick": 2.81})
    assert shown == ", 2.96 ms of kernel time: +0.15 ms overlapped" and _overlap({"busy_ms_per_tick": 1.0}) == ""


def test_overlap_pairs_name_the_kernels_and_whether_they_share_a_stream():
    """Two kernels on one stream, the second launched 3 µs before the first ends (PDL-like), and a kernel on a
    second stream running 4 µs inside the first: each pair is named with its stream relation; the kernel
    that started later but ended earlier does not hide the long one from the next."""
    from benchmarks.device_trace import overlap_pairs
    from benchmarks.report import _kernel_tables

    events = [{"name": "gemm_fusion_dot.3", "ts": 0.0, "dur": 10.0, "tid": 1},
              {"name": "loop_add_fusion.1", "ts": 2.0, "dur": 4.0, "tid": 2},
              {"name": "fused_decode_attention_s3", "ts": 7.0, "dur": 5.0, "tid": 1}]
    pairs = overlap_pairs(events, ticks=1)
    assert pairs == [("gemm_fusion_dot", "loop_add_fusion", False, 4.0, 1.0),
                     ("gemm_fusion_dot", "fused_decode_attention_s3", True, 3.0, 1.0)]
    row = {"context": 1024, "concurrency": 1, "traced_ticks": {
        "ticks": 1, "busy_ms_per_tick": 0.012, "kernel_ms_per_tick": 0.019, "overlaps": pairs,
        "top_kernels": [("gemm_fusion_dot", 10.0, 1.0)]}}
    text = "\n".join(_kernel_tables([row]))
    assert "| `gemm_fusion_dot` | `fused_decode_attention_s3` | same | 3.0 | 1.0 |" in text
    assert "| `gemm_fusion_dot` | `loop_add_fusion` | other | 4.0 | 1.0 |" in text


def test_launch_edges_split_gaps_by_pallas_and_xla_kernels():
    """Over two ticks: an XLA fusion, then a Pallas GEMV 1 µs after it, then the attention 0.5 µs early, then
    the next tick's fusion 3 µs after the attention ends: each edge class gets its count, median and sum."""
    from benchmarks.device_trace import launch_edges
    from benchmarks.report import _kernel_tables

    events, t = [], 0.0
    for _ in range(2):
        events += [{"name": "fusion.7", "ts": t, "dur": 2.0},
                   {"name": "quant_gemv_fp8_r2", "ts": t + 3.0, "dur": 5.0},
                   {"name": "fused_decode_attention_s33", "ts": t + 7.5, "dur": 4.0}]
        t += 14.5  # the attention ends at +11.5: 3 µs to the next fusion
    edges = {k: (n, med, tot) for k, n, med, tot in launch_edges(events, ticks=2)}
    assert edges["xla>pallas"] == pytest.approx((1.0, 1.0, 1.0))
    assert edges["pallas>pallas"] == pytest.approx((1.0, -0.5, -0.5))
    assert edges["pallas>xla"] == pytest.approx((0.5, 3.0, 1.5))  # one edge in two ticks
    assert "xla>xla" not in edges
    row = {"context": 1024, "concurrency": 1, "traced_ticks": {
        "ticks": 2, "busy_ms_per_tick": 0.012, "top_kernels": [("fusion", 2.0, 1.0)],
        "edges": launch_edges(events, ticks=2)}}
    assert "| pallas>pallas | 1.0 | -0.50 | -0.5 |" in "\n".join(_kernel_tables([row]))


def test_graph_re_records_are_read_from_the_host_lines(tmp_path):
    import gzip
    import json

    from benchmarks.device_trace import GRAPH_UPDATE, device_events, graph_updates, host_events

    meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
            {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "name": "thread_name", "pid": 2, "tid": 7, "args": {"name": "Stream #1"}}]

    def update(ts, commands, dur):
        return {"ph": "X", "name": GRAPH_UPDATE, "pid": 1, "tid": 3, "ts": ts, "dur": dur,
                "args": {"num_commands": str(commands), "num_executions": "1"}}

    events = meta + [update(10, 792, 400.0), update(20, 4, 15.0), update(30, 792, 600.0), update(40, 792, 500.0),
                     {"ph": "X", "name": "quant_gemv_fp8", "pid": 2, "tid": 7, "ts": 12, "dur": 5.0},
                     {"ph": "X", "name": GRAPH_UPDATE, "pid": 2, "tid": 7, "ts": 50, "dur": 1.0}]  # a GPU line
    path = tmp_path / "perfetto_trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    host = host_events(str(path), (GRAPH_UPDATE,))
    assert [e["ts"] for e in host] == [10, 20, 30, 40]  # the GPU line's event is not a host event
    assert graph_updates(host) == [(792, 3, 500.0), (4, 1, 15.0)]
    assert graph_updates(host, top=1) == [(792, 3, 500.0)]
    assert [e["name"] for e in device_events(str(path))] == ["quant_gemv_fp8", GRAPH_UPDATE]

    from benchmarks.report import _kernel_tables

    row = {"context": 1024, "concurrency": 1,
           "traced_ticks": {"ticks": 2, "busy_ms_per_tick": 0.012, "top_kernels": [("fusion", 2.0, 1.0)]},
           "traced_graph_updates": {"graphs": graph_updates(host), "decode_dispatches": 12}}
    text = "\n".join(_kernel_tables([row]))
    assert "(12 decode dispatches;" in text and "792 commands: 3 (500 µs each); 4 commands: 1 (15 µs each)" in text
    row["traced_graph_updates"]["graphs"] = []  # a CPU run: no command buffers, no line
    assert "re-recorded" not in "\n".join(_kernel_tables([row]))


def test_launch_mode_reads_the_edge_weighted_median_gap():
    """Fast-mode qwen3 edges (s19a: every class a fraction of a µs early) read "early", the slow mode's (all
    late) "late", glm's s18 edges at -0.03 µs "late"; the class with most edges decides a split vote."""
    from benchmarks.device_trace import launch_mode
    from benchmarks.report import _decode_table

    fast = [("pallas>pallas", 143.7, -0.22, -31.9), ("pallas>xla", 144.7, -0.19, -31.0),
            ("xla>pallas", 144.2, -0.19, -28.3), ("xla>xla", 370.0, -0.16, 218.2)]
    slow = [("pallas>pallas", 143.2, 0.13, 21.1), ("xla>xla", 370.0, 0.15, 60.0)]
    assert launch_mode(fast) == "early" and launch_mode(slow) == "late"
    assert launch_mode([("pallas>pallas", 270.0, -0.03, -8.0)]) == "late"
    assert launch_mode([("pallas>pallas", 10.0, -0.3, -3.0), ("xla>xla", 30.0, 0.2, 6.0)]) == "late"
    assert launch_mode([("pallas>pallas", 30.0, -0.3, -9.0), ("xla>xla", 10.0, 0.2, 2.0)]) == "early"
    assert launch_mode(None) is None and launch_mode([]) is None
    row = {"context": 1024, "concurrency": 1, "ms_per_step": 2.7, "tok_s_per_stream": 370.0,
           "tok_s_aggregate": 370.0, "mean_context": 1120, "bytes_per_step": 3.5e9, "weight_bytes": 3.4e9,
           "kv_bytes": 1e8, "bytes_per_s": 1.3e12, "frac_ceiling": 0.29, "roofline_ms": 0.8,
           "device_ms_per_step": 2.77, "device_frac_ceiling": 0.28, "idle_share": 0.09, "ref_gather_bytes": 2e8,
           "dispatch_ms_per_tick": 2.7, "traced_ticks": {"edges": slow}}
    assert _decode_table([row])[-1].endswith("| late |")
    assert _decode_table([dict(row, traced_ticks=None)])[-1].endswith("| n/a |")
