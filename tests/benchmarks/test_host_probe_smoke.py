"""benchmarks/host_probe.py runs end to end on the CPU (interpreted Pallas) and prints one line per probe."""

from __future__ import annotations

import subprocess
import sys


def test_host_probe_smoke_prints_every_probe():
    out = subprocess.run([sys.executable, "-m", "benchmarks.host_probe", "--smoke", "--calls", "2", "--kernels"],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    names = [line.split()[0] for line in out.splitlines() if "us/call" in line]
    assert names == ["args", "pallas", "xla", "donated", "stacked-pallas", "stacked-dot"]
    assert all(float(line.split()[2]) > 0 for line in out.splitlines() if "us/call" in line)
