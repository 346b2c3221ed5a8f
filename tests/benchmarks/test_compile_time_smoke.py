"""benchmarks/compile_time on the CPU: every variant compiles in its own process and reports the decode and
prefill executables it compiled (none loaded from a cache: each variant starts with an empty one)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_each_variant_reports_fresh_compile_times():
    args = [sys.executable, "-m", "benchmarks.compile_time", "--preset", "tiny", "--tiny", "--chunk", "64",
            "--variants", "packed,none"]
    proc = subprocess.run(args, cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == ["packed", "none"], lines
    for ln in lines:
        cells = dict(re.findall(r"(\S+)\s+([\d.]+)", ln))
        assert set(cells) >= {"decode[B=2,top=0]", "prefill[T=64,prompt_logprobs=False]", "total"}, ln
        assert all(float(v) > 0 for v in cells.values()), ln
        assert "*" not in ln, ln  # no executable came from the cache
