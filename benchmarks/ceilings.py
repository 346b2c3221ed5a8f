"""The device's two ceilings, measured in the same run as the model: HBM read bandwidth and bf16 matmul rate.

Timed as many asynchronous calls followed by one sync, median over several repeats: syncing after
every call adds a host round trip (~190 µs on the H200 machine) to each sample.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable

import jax
import jax.numpy as jnp


@dataclasses.dataclass
class Timing:
    """Seconds per call: the median and every repeat's mean (one repeat = `calls` async calls + a sync)."""

    median_s: float
    samples_s: list[float]
    calls: int


def time_async(fn: Callable[[], object], calls: int, repeats: int, warmup: int = 2) -> Timing:
    """Time `fn` (which dispatches device work and returns its output) without a sync per call."""
    out = None
    for _ in range(warmup):
        out = fn()
    jax.block_until_ready(out)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = fn()
        jax.block_until_ready(out)
        samples.append((time.perf_counter() - t0) / calls)
    return Timing(statistics.median(samples), samples, calls)


@dataclasses.dataclass
class ReadCeiling:
    bytes_read: int
    seconds: Timing
    bytes_per_s: float


def read_array(nbytes: int, seed: int = 0) -> jax.Array:
    """A random bf16 [rows, cols] array of about `nbytes`, made on the device (what the read ceilings read)."""
    rows = 4096 if nbytes >= 4096 * 4096 * 2 else 256
    cols = max(nbytes // (2 * rows), 1024)
    # One key per row keeps every random draw far below 2**32 elements, whatever the total size.
    row = lambda k: jax.random.uniform(k, (cols,), jnp.bfloat16, -1.0, 1.0)  # noqa: E731
    return jax.jit(lambda k: jax.vmap(row)(jax.random.split(k, rows)))(jax.random.key(seed))


def measure_read_ceiling(nbytes: int, calls: int = 10, repeats: int = 5, seed: int = 0) -> ReadCeiling:
    """Row sums of a random bf16 [rows, cols] array of about `nbytes` (`read_array`): one read of every byte."""
    x = read_array(nbytes, seed)
    reduce = jax.jit(lambda a: jnp.sum(a, axis=1, dtype=jnp.float32))
    timing = time_async(lambda: reduce(x), calls, repeats)
    size = x.nbytes
    x.delete()
    return ReadCeiling(size, timing, size / timing.median_s)


@dataclasses.dataclass
class MatmulCeiling:
    size: int
    flops: float
    seconds: Timing
    flops_per_s: float


def measure_matmul_ceiling(size: int, calls: int = 10, repeats: int = 5, seed: int = 1) -> MatmulCeiling:
    """A random bf16 size³ matrix product (float32 accumulation, bf16 out), the prefill reference rate."""
    ka, kb = jax.random.split(jax.random.key(seed))
    make = jax.jit(lambda k: jax.random.normal(k, (size, size), jnp.bfloat16))
    a, b = make(ka), make(kb)
    mm = jax.jit(lambda x, y: jnp.matmul(x, y, preferred_element_type=jnp.float32).astype(jnp.bfloat16))
    timing = time_async(lambda: mm(a, b), calls, repeats)
    a.delete()
    b.delete()
    flops = 2.0 * size**3
    return MatmulCeiling(size, flops, timing, flops / timing.median_s)


def add_timing_args(p, layers: int) -> None:
    """The timed checks' common options: layers per call, async calls per timing, repeats, CPU smoke mode."""
    p.add_argument("--layers", type=int, default=layers, help="layers (distinct weights or logits) per call")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--smoke", action="store_true", help="CPU: kernels interpreted, 2 layers, few calls")
