"""benchmarks/gpu_state.py: the spin is a no-op off the GPU, and the clock reader parses nvidia-smi's csv
answer and gives None where it is missing or answers nonsense. nvidia-smi cannot run on the CPU-only CI
machine, so a stand-in script on PATH answers as it does (its csv, noheader, nounits format)."""

from __future__ import annotations

import os
import stat

import pytest

from benchmarks import gpu_state


def test_spin_does_nothing_off_the_gpu():
    assert gpu_state.spin(0.5) == 0 and gpu_state.spin(0) == 0


def _fake_smi(tmp_path, body: str):
    exe = tmp_path / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(tmp_path)


@pytest.mark.parametrize("body,want", [
    ('echo "1980, 3201"', {"sm": 1980, "mem": 3201}),
    ('echo "345, 3201"; echo "1980, 3201"', {"sm": 345, "mem": 3201}),  # GPU 0's line
    ('echo "[N/A], [N/A]"', None),
    ("exit 3", None),
])
def test_clock_reader_parses_the_csv_answer(tmp_path, monkeypatch, body, want):
    monkeypatch.setenv("PATH", _fake_smi(tmp_path, body) + os.pathsep + os.environ["PATH"])
    assert gpu_state.clocks_mhz() == want


def test_clock_reader_without_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no nvidia-smi
    assert gpu_state.clocks_mhz() is None
