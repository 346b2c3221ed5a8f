"""The GPU's clock state around a measured window: keep it busy just before, read its clocks either side.

Why: the H200 idles at a 345 MHz SM clock and reaches 1980 MHz under load (the device library's KINDS.md).
A decode_bench case spends most of its minute compiling with the GPU idle, then measures a steady window
of well under a second. Latency-bound kernels (a decode tick is ~800 launches of a few µs) run slower while
the clock ramps, and in session 9 the first engine run of a call was the slow one in 3 of 4 calls, at
equal device time in the later, traced window. So each measured window now follows a short spin of device
work, and the clocks read before and after it land in the result (nvidia-smi, read-only; None where there
is none). The clocks themselves are never set (METHOD.md: measure the card as you find it).
"""

from __future__ import annotations

import shutil
import subprocess
import time

import jax
import jax.numpy as jnp

SPIN_SIZE = 4096  # one bf16 product: ~0.2 ms on the H200, long enough that the loop is device-bound


def spin(seconds: float) -> int:
    """Keep the default device busy for about `seconds` (matrix products, async, one sync at the end).
    Returns the products run; 0 off the GPU or for seconds <= 0 (nothing to warm)."""
    if seconds <= 0 or jax.default_backend() != "gpu":
        return 0
    a = jnp.ones((SPIN_SIZE, SPIN_SIZE), jnp.bfloat16)
    step = jax.jit(lambda x: (x @ a) * jnp.bfloat16(1 / SPIN_SIZE))  # ones stay ones: no overflow
    x, n, end = step(a), 1, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(10):
            x = step(x)
        n += 10
        if n % 200 == 1:  # bound the queue: the host must not run far ahead
            x.block_until_ready()
    x.block_until_ready()
    return n


def clocks_mhz() -> dict[str, int] | None:
    """{"sm": MHz, "mem": MHz} of GPU 0 from nvidia-smi, or None where it is missing or does not answer."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=clocks.sm,clocks.mem", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=10)
        sm, mem = (int(v) for v in out.stdout.strip().splitlines()[0].split(","))
        return {"sm": sm, "mem": mem}
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None
