"""benchmarks/mode_probe.py builds several engines in one process on the CPU and times a round on each."""

from __future__ import annotations

import json

from benchmarks import mode_probe


def test_mode_probe_times_every_engine_and_round(tmp_path, capsys):
    out = tmp_path / "rounds.jsonl"
    rows = mode_probe.main(["--preset", "tiny", "--layers", "1", "--engines", "2", "--rounds", "2",
                            "--context", "32", "--tokens", "8", "--direct", "3", "--out", str(out)])
    assert [(r["engine"], r["round"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(r["ms_per_step"] > 0 and r["wait_ms"] >= 0 and r["dispatch_host_ms"] > 0 for r in rows)
    direct = [(r["direct_ms"], r["direct_nocopy_ms"], r["direct_ms_again"]) for r in rows if "direct_ms" in r]
    assert len(direct) == 2 and all(t > 0 for ts in direct for t in ts)  # each engine's last round
    assert [json.loads(line) for line in out.read_text().splitlines()] == rows
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("round ")]
    assert len(printed) == 4 and "engine=1 round=1" in printed[-1]


def test_mode_probe_replaced_buffers_still_decode(tmp_path):
    """--replace moves the decode parameters and the device state to new buffers; the engine keeps decoding on
    them (the originals are gone) and the ticks after each move are timed."""
    rows = mode_probe.main(["--preset", "tiny", "--layers", "1", "--engines", "1", "--rounds", "1",
                            "--context", "32", "--tokens", "8", "--direct", "3", "--replace", "--redraws", "2"])
    assert rows[0]["direct_new_params_ms"] > 0 and rows[0]["direct_new_state_ms"] > 0
    assert len(rows[0]["direct_redraws_ms"]) == 2 and all(t > 0 for t in rows[0]["direct_redraws_ms"])


def test_mode_probe_layers_override_reaches_the_config(tmp_path):
    d = mode_probe.model_dir_for("tiny", 3, str(tmp_path))
    assert json.loads((tmp_path / "config.json").read_text())["num_hidden_layers"] == 3
    assert d == str(tmp_path)
