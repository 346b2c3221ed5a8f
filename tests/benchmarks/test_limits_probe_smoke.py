"""benchmarks/limits_probe.py on the CPU: its chains compute what they claim (so the GPU timings time real,
dependent work), the fit recovers a known fixed cost and bandwidth, and the smoke run prints every section."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import limits_probe


def test_tiny_kernel_chain_is_the_affine_recurrence():
    x = jnp.arange(2 * 8 * 128, dtype=jnp.float32).reshape(16, 128)
    y = x
    for _ in range(3):
        y = limits_probe.tiny_pallas(y, 2, interpret=True)
    program = np.repeat(np.arange(2), 8)[:, None].astype(np.float32)  # each program adds its id
    want = np.asarray(x) * 0.125 + program * (0.25 + 0.5 + 1.0)
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-6)


@pytest.mark.parametrize("n", [1024, 4096, 14336])
def test_next_input_keeps_the_chain_width(n):
    y = jnp.arange(2 * n, dtype=jnp.float32).reshape(2, n)
    nxt = limits_probe._next_input(y, 4096)
    assert nxt.shape == (2, 4096)
    np.testing.assert_array_equal(np.asarray(nxt[:, : min(n, 4096)]), np.asarray(y[:, : min(n, 4096)]))


def test_fit_recovers_fixed_cost_and_bandwidth():
    pts = [{"bytes": b, "us": 3.0 + b / 4.0e6} for b in (1e6, 8e6, 64e6, 256e6)]  # a = 3 µs, b = 4 TB/s
    a, b = limits_probe.fit(pts)
    assert a == pytest.approx(3.0, rel=1e-6) and b == pytest.approx(4.0e12, rel=1e-6)


def test_smoke_run_prints_every_section():
    lines = limits_probe.main(["--smoke"])
    text = "\n".join(lines)
    for section in ("## Read ceiling", "## Boundary floor", "### bf16, XLA dot", "### fp8 block, quant_gemv, PDL on",
                    "## Fits"):
        assert section in text
    floor_rows = [r for r in lines if r.startswith("| Pallas, 1 program(s)")]
    assert len(floor_rows) == 3 and all(int(r.split("|")[2]) == 4 for r in floor_rows)  # --smoke chains 4 kernels
