"""What a decode step can cost at best on this GPU under the engine's launch structure: the HBM read ceiling
measured several ways, the floor of one dependent kernel boundary inside a CUDA graph, and a projection's time
as fixed cost + bytes / bandwidth.

Why: the MoE and llama targets of issues 3 and 4 are still unmet after every fusion that removed launches lost
on the H200 (sessions 7-23). This probe puts numbers on the model those sessions argued from: a decode step
costs about (kernels a step) x (the floor of a boundary) + (bytes a step) / (read bandwidth), and a projection
about a + bytes / b. With a and b fitted here, the best step a preset can reach with its kernel count follows,
and so whether a target is reachable without fewer launches.

Cases, each a dependent chain inside one jit (one CUDA graph: `--xla_gpu_graph_min_graph_size=1`, dgjax's
default flags), timed by wall clock over many asynchronous calls and one sync (benchmarks/ceilings.time_async);
one traced call counts the kernels a call runs:
- read ceilings of one ~8.6 GB bf16 array: row sums (the ceiling every decode_bench run reports), column sums,
  a full sum, and a Pallas kernel streaming it (dgjax/pallas/l2_prefetch, evict_first) at several grid sizes;
- boundary floor: a chain of `--chain` tiny Pallas kernels (each reads the previous one's [8, 128] float32 output,
  1 or 132 programs), with PDL triggers off and on (dgjax/pallas/pdl.py); a chain of tiny XLA fusions (elementwise
  steps kept apart by optimization barriers);
- projection ladder: x[2, K] . W[K, K] chained over distinct weights (each step's input the previous output), for
  bf16 weights through XLA's dot and fp8 block weights through the quantized GEMV kernel (dgjax/pallas/quant_gemv:
  its split-K partial sum counted), K from 1024 to 11264; least squares of time against bytes gives a and b.

    python3 -m benchmarks.limits_probe --out $OUT        # GPU
    python -m benchmarks.limits_probe --smoke           # CPU: tiny sizes, kernels interpreted, timings meaningless
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

from benchmarks import gpu_state
from benchmarks.ceilings import read_array, time_async
from benchmarks.device_trace import trace_events
from benchmarks.launch_sweep import fp8_node
from benchmarks.report import machine_info, markdown_table, write_lines
from dgjax.pallas import pdl
from dgjax.pallas.l2_prefetch import kernel as stream_kernel
from dgjax.pallas.quant_gemv import api as gemv_api

# (K, N) ladders at the presets' widths: K = 4096 (llama-3.1-8b's hidden, bf16), K = 2048 (qwen3-30b-a3b's, fp8)
BF16_SHAPES = tuple((4096, n) for n in (1024, 2048, 4096, 6144, 8192, 14336, 28672))
FP8_SHAPES = tuple((2048, n) for n in (1024, 2048, 4096, 5120, 8192, 16384, 32768))
SMOKE_SHAPES = ((256, 128), (256, 512))
CHAIN_BYTES = 2 << 30  # a ladder call reads at least this much (many steps for small K), at most MAX_STEPS
MAX_STEPS = 256
MIN_STEPS = 8
STREAM_PROGRAMS = (132, 264, 528, 1056)


def read_ceilings(nbytes: int, calls: int, repeats: int, interpret: bool, rounds: int = 2) -> list[tuple[str, float]]:
    """(name, bytes/s: the best of `rounds` interleaved rounds) for one bf16 array of about `nbytes`, read whole
    each way (interleaved, so a clock still ramping does not favour the ways timed last)."""
    x = read_array(nbytes)
    ways = {
        "row sums (decode_bench's ceiling)": jax.jit(lambda a: jnp.sum(a, axis=1, dtype=jnp.float32)),
        "column sums": jax.jit(lambda a: jnp.sum(a, axis=0, dtype=jnp.float32)),
        "full sum": jax.jit(lambda a: jnp.sum(a, dtype=jnp.float32)),
    }
    for p in STREAM_PROGRAMS:
        ways[f"Pallas stream, {p} programs"] = jax.jit(functools.partial(
            stream_kernel.l2_prefetch, programs=p, eviction_policy="evict_first", interpret=interpret))
    best = {name: 0.0 for name in ways}
    for _ in range(rounds):
        for name, fn in ways.items():
            t = time_async(lambda fn=fn: fn(x), calls, repeats)
            best[name] = max(best[name], x.nbytes / t.median_s)
    x.delete()
    return list(best.items())


def _tiny_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 0.5 + pl.program_id(0).astype(jnp.float32)


def tiny_pallas(x: jax.Array, programs: int, interpret: bool) -> jax.Array:
    """[programs * 8, 128] float32 -> the same: each program reads and writes its 4 KB block."""
    return pl.pallas_call(_tiny_kernel, grid=(programs,),
                          in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret,
                          name=f"tiny_p{programs}")(x)


NO_GRAPH = {"xla_gpu_graph_min_graph_size": "1000000"}  # a compile option: no CUDA graph for this executable


def _compiled(fn, args, pdl_mode: str | None, options: dict | None = None):
    ctx = pdl.model_default(pdl_mode) if pdl_mode else contextlib.nullcontext()
    with ctx:
        return jax.jit(fn).lower(*args).compile(compiler_options=options)


def call_events(compiled, args) -> list[dict]:
    """The kernel events of one traced call (no copies)."""
    return [e for e in trace_events(lambda: jax.block_until_ready(compiled(*args))) if not e["name"].startswith("Memcpy")]


def trace_stats(compiled, args) -> tuple[int, float, float]:
    """(kernels one call runs, their mean duration µs, device span µs a kernel: first start to last end over the
    count), from the device trace; (0, nan, nan) where the platform records none."""
    ev = call_events(compiled, args)
    if not ev:
        return 0, float("nan"), float("nan")
    span = max(e["ts"] + e["dur"] for e in ev) - min(e["ts"] for e in ev)
    return len(ev), sum(e["dur"] for e in ev) / len(ev), span / len(ev)


def kernel_mix(events: list[dict], steps: int) -> str:
    """'name µs a step (calls a step); ...' for the kernel names of a traced chain, dearest first."""
    per: dict[str, list[float]] = {}
    for e in events:
        per.setdefault(e["name"], []).append(e["dur"])
    top = sorted(per.items(), key=lambda kv: -sum(kv[1]))[:3]
    return "; ".join(f"`{n[:48]}` {sum(d) / steps:.2f} ({len(d) / steps:.1f})" for n, d in top)


def boundary_floors(chain: int, calls: int, repeats: int, interpret: bool) -> list[list]:
    """Rows: case, kernels a call, µs a call (wall), µs a kernel (wall), mean kernel µs and device span µs a kernel
    (trace)."""
    rows = []

    def row(name, c, x):
        t = time_async(lambda: c(x), calls, repeats).median_s
        n, dur, span = trace_stats(c, (x,))
        n = n or chain
        rows.append([name, n, f"{t * 1e6:.1f}", f"{t * 1e6 / n:.2f}", f"{dur:.2f}", f"{span:.2f}"])

    for programs in (1, 132):
        x = jnp.ones((programs * 8, 128), jnp.float32)

        def run(a, programs=programs):
            for _ in range(chain):
                a = tiny_pallas(a, programs, interpret)
            return a

        for mode in ("off", "on"):
            row(f"Pallas, {programs} program(s), PDL triggers {mode}", _compiled(run, (x,), mode), x)
        row(f"Pallas, {programs} program(s), PDL triggers off, no CUDA graph", _compiled(run, (x,), "off", NO_GRAPH), x)
    x = jnp.ones((2, 2048), jnp.float32)

    def xla_chain(a):
        for i in range(chain):
            a = lax.optimization_barrier(jnp.sin(a) * (1.0 + 1e-3 * i))
        return a

    row("XLA elementwise fusion [2, 2048]", _compiled(xla_chain, (x,), None), x)
    row("XLA elementwise fusion [2, 2048], no CUDA graph", _compiled(xla_chain, (x,), None, NO_GRAPH), x)
    return rows


def _weights(k: int, n: int, steps: int, fp8: bool):
    make = jax.jit(lambda key: jax.random.normal(key, (k, n), jnp.bfloat16) * (1.0 / np.sqrt(k)))
    keys = jax.random.split(jax.random.key(k * 7 + n), steps)
    return [fp8_node(make(key), 0) if fp8 else make(key) for key in keys]


def _next_input(y: jax.Array, k: int) -> jax.Array:
    """The next step's [rows, K] input from this step's [rows, N] output (sliced or tiled)."""
    n = y.shape[1]
    return y[:, :k] if n >= k else jnp.tile(y, (1, k // n))


def ladder(shapes: tuple[tuple[int, int], ...], fp8: bool, pdl_mode: str | None, calls: int, repeats: int,
           budget_s: float, t0: float) -> list[dict]:
    """Per (K, N): bytes a weight, steps a call, kernels a step, µs a step (a dependent chain over distinct
    weights, each step's input the previous step's output)."""
    out = []
    for k, n in shapes:
        if time.time() - t0 > budget_s:
            break
        wbytes = k * n * (1 if fp8 else 2)
        steps = int(min(MAX_STEPS, max(MIN_STEPS, CHAIN_BYTES // wbytes)))
        ws = _weights(k, n, steps, fp8)
        x = jax.random.normal(jax.random.key(1), (2, k), jnp.bfloat16)

        def run(a, ws):
            for w in ws:
                y = gemv_api.quant_matmul(a, w) if fp8 else jnp.dot(a, w, preferred_element_type=jnp.float32)
                a = _next_input(y.astype(jnp.bfloat16), a.shape[1])
            return a

        c = _compiled(run, (x, ws), pdl_mode)
        t = time_async(lambda c=c, ws=ws: c(x, ws), calls, repeats).median_s
        ev = call_events(c, (x, ws))
        out.append({"k": k, "n": n, "bytes": wbytes, "steps": steps,
                    "kernels": len(ev) / steps if ev else float("nan"), "us": t * 1e6 / steps,
                    "mix": kernel_mix(ev, steps)})
        ws = c = None  # free the weights before the next size
    return out


def fit(points: list[dict]) -> tuple[float, float]:
    """Least squares us = a + bytes / b: (a in µs, b in bytes/s)."""
    if len(points) < 2:
        return float("nan"), float("nan")
    slope, a = np.polyfit([p["bytes"] for p in points], [p["us"] for p in points], 1)
    return float(a), float(1e6 / slope) if slope > 0 else float("inf")


def main(argv=None) -> list[str]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None)
    p.add_argument("--smoke", action="store_true", help="tiny sizes on CPU (kernels interpreted)")
    p.add_argument("--read-gb", type=float, default=2**33 / 1e9, help="decode_bench's size: 2**33 bytes, 4096 aligned rows")
    p.add_argument("--chain", type=int, default=256)
    p.add_argument("--warm-s", type=float, default=10.0)
    p.add_argument("--sections", default="floor,bf16,fp8",
                   help="comma-separated among floor, bf16, fp8 (the read ceilings always run: the ladders' scale)")
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget-s", type=float, default=400.0, help="ladder sizes start only within this budget")
    a = p.parse_args(argv)
    gpu = jax.default_backend() == "gpu"
    interpret = not gpu
    if a.smoke:
        a.read_gb, a.chain, a.calls, a.repeats = 0.004, 4, 1, 1
    t0 = time.time()
    info = machine_info()
    lines = [f"# Limits probe on {info['device_kind']} ({time.strftime('%Y-%m-%d')})", "",
             f"- machine: {info['device_kind']} x{info['num_devices']} ({info['platform']}), jax {info['jax']}, "
             f"jaxlib {info['jaxlib']}; environment: {info['environment']}", ""]

    spun = gpu_state.spin(a.warm_s)  # an idle H200 runs its SMs at 345 MHz: ramp the clocks first
    lines += [f"- warmed {a.warm_s:.0f} s first ({spun} products); clocks after: {gpu_state.clocks_mhz()}", ""]
    ceilings = read_ceilings(int(a.read_gb * 1e9), a.calls, a.repeats, interpret)
    best = max(b for _, b in ceilings)
    lines += ["## Read ceiling (one bf16 array read whole)", ""]
    lines += markdown_table(["way", "TB/s", "of the best"],
                            [[n, f"{b / 1e12:.3f}", f"{b / best:.1%}"] for n, b in ceilings])

    sections = set(a.sections.split(","))
    if "floor" in sections:
        lines += ["", f"## Boundary floor (a chain of {a.chain} dependent tiny kernels in one jit)", ""]
        lines += markdown_table(["case", "kernels a call", "µs a call", "µs a kernel", "mean kernel µs (trace)",
                                 "device span µs a kernel (trace)"],
                                boundary_floors(a.chain, a.calls, a.repeats, interpret))

    lines += ["", "## Projections: x[2, K] . W[K, N], a dependent chain over distinct weights", ""]
    fits = []
    for section, label, fp8, mode, shapes in (("bf16", "bf16, XLA dot", False, None, BF16_SHAPES),
                                              ("fp8", "fp8 block, quant_gemv, PDL off", True, "off", FP8_SHAPES),
                                              ("fp8", "fp8 block, quant_gemv, PDL on", True, "on", FP8_SHAPES)):
        if section not in sections:
            continue
        pts = ladder(SMOKE_SHAPES if a.smoke else shapes, fp8, mode, a.calls, a.repeats, a.budget_s, t0)
        fa, fb = fit(pts)
        fits.append([label, f"{fa:.2f}", f"{fb / 1e12:.3f}", f"{fb / best:.1%}"])
        lines += ["", f"### {label}", ""]
        lines += markdown_table(["K x N", "MB a weight", "steps a call", "kernels a step", "µs a step", "TB/s",
                                 "of the best read", "kernels (trace: µs a step, calls a step)"],
                                [[f"{q['k']} x {q['n']}", f"{q['bytes'] / 1e6:.1f}", q["steps"], f"{q['kernels']:.1f}",
                                  f"{q['us']:.2f}", f"{q['bytes'] / q['us'] / 1e6:.3f}",
                                  f"{q['bytes'] / q['us'] / 1e6 / (best / 1e12):.1%}", q["mix"]] for q in pts])
    lines += ["", "## Fits: µs a projection = a + bytes / b", ""]
    lines += markdown_table(["projection", "a µs", "b TB/s", "b of the best read"], fits)
    lines += ["", f"Wall: {time.time() - t0:.0f} s."]
    write_lines(a.out, "limits.md", lines)
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
