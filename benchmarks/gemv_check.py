"""The skinny GEMV kernel on the GPU at the decode projection shapes: correct, and faster than XLA?

For each shape (qwen3-30b-a3b / llama-3.1-8b qkv with the input RMSNorm fused, their o projections plain)
and row count: the kernel (through dgjax.pallas.gemv's launch choice) against ref.py (max |error| / max
|ref|), and the time per product of the kernel vs what decode ran before it (XLA: rms_norm then dot, two
launches where normed). Timing as benchmarks/gemv_kernel_sweep.py: one executable runs the product over
enough distinct weights to exceed L2, async calls then one sync. The read ceiling is measured in the same
run; the summary table comes last.

    python3 -m benchmarks.gemv_check
    python -m benchmarks.gemv_check --smoke     # CPU: tiny shape, kernel interpreted
"""

from __future__ import annotations

import argparse
import dataclasses

import jax
import jax.numpy as jnp

from benchmarks.ceilings import measure_read_ceiling, time_async
from dgjax.pallas.gemv import api, kernel, ref

SHAPES = {  # name: (K, N, norm fused)
    "qwen3-moe qkv+norm": (2048, 5120, True),
    "qwen3-moe o": (4096, 2048, False),
    "llama qkv+norm": (4096, 6144, True),
    "llama o": (4096, 4096, False),
}
SMOKE_SHAPES = {"smoke qkv+norm": (256, 256, True)}


@dataclasses.dataclass
class Row:
    shape: str
    rows: int
    mb: float
    kernel_us: float
    xla_us: float
    rel: float
    launch: str


def _timed(fn, xs, ws, calls: int, repeats: int) -> float:
    many = jax.jit(lambda xs, ws, nw: tuple(fn(x, w, nw) for x, w in zip(xs, ws)))
    nw = jnp.ones((xs[0].shape[1],), xs[0].dtype) * 1.1
    return time_async(lambda: many(xs, ws, nw), calls=max(2, calls // len(ws)), repeats=repeats).median_s / len(ws)


def run_case(name: str, k: int, n: int, normed: bool, rows: int, min_bytes: int, interpret: bool,
             calls: int, repeats: int) -> Row:
    copies = max(2, -(-min_bytes // (k * n * 2)))
    make = jax.jit(lambda key: jax.random.normal(key, (k, n), jnp.bfloat16) / 64)
    ws = [make(jax.random.key(i)) for i in range(copies)]
    xs = [jax.random.normal(jax.random.key(1000 + i), (rows, k), jnp.bfloat16) for i in range(copies)]
    launch = api.launch_for(k, n)
    pick = lambda nw: nw if normed else None  # noqa: E731

    def by_kernel(x, w, nw):
        return jnp.sum(kernel.gemv(x, w, pick(nw), launch=launch, interpret=interpret), axis=0).astype(x.dtype)

    def by_xla(x, w, nw):
        return ref.gemv(x, w, pick(nw)).astype(x.dtype)

    norm = jnp.linspace(0.5, 1.5, k, dtype=jnp.float32).astype(jnp.bfloat16)
    got = jnp.sum(jax.jit(lambda x, w, nw: kernel.gemv(x, w, pick(nw), launch=launch, interpret=interpret))(
        xs[0], ws[0], norm), axis=0)
    want = ref.gemv(xs[0], ws[0], pick(norm))
    rel = float(jnp.max(jnp.abs(got - want)) / jnp.max(jnp.abs(want)))
    t_kernel = _timed(by_kernel, xs, ws, calls, repeats)
    t_xla = _timed(by_xla, xs, ws, calls, repeats)
    cfg = f"bn{launch.block_n} bk{launch.block_k} s{launch.splits}"
    return Row(name, rows, k * n * 2 / 1e6, t_kernel * 1e6, t_xla * 1e6, rel, cfg)


def main(argv: list[str] | None = None) -> list[Row]:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, nargs="+", default=[2, 4, 16])
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args(argv)
    shapes = SMOKE_SHAPES if a.smoke else SHAPES
    interpret = a.smoke
    ceiling = None if a.smoke else measure_read_ceiling(2 << 30)
    if ceiling:
        print(f"device {jax.devices()[0].device_kind}; read ceiling {ceiling.bytes_per_s / 1e12:.3f} TB/s", flush=True)
    out = []
    for name, (k, n, normed) in shapes.items():
        for rows in a.rows:
            r = run_case(name, k, n, normed, rows, 1 << 20 if a.smoke else 400 << 20, interpret,
                         4 if a.smoke else 200, 1 if a.smoke else 5)
            out.append(r)
            print(f"{name} M={rows}: kernel {r.kernel_us:.1f} µs, xla {r.xla_us:.1f} µs, rel err {r.rel:.1e}", flush=True)
    bw = ceiling.bytes_per_s if ceiling else None
    print("\n| shape | rows | MB | launch | kernel µs | XLA (norm + dot) µs | kernel TB/s | of ceiling | max rel err |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in out:
        tbs = r.mb * 1e6 / (r.kernel_us * 1e-6) / 1e12
        frac = f"{tbs * 1e12 / bw:.0%}" if bw else "n/a"
        print(f"| {r.shape} | {r.rows} | {r.mb:.1f} | {r.launch} | {r.kernel_us:.1f} | {r.xla_us:.1f} | {tbs:.2f} | "
              f"{frac} | {r.rel:.1e} |")
    return out


if __name__ == "__main__":
    main()
