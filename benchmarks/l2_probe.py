"""How much faster decode's weight readers run when their weight is already in L2, and whether an L2 prefetch
kernel (dgjax/pallas/l2_prefetch) placed beside latency-bound kernels gets them there.

Three parts, each timed from the device trace (kernel durations) and, for part C, also by wall clock:
- A "hot vs cold": one reader (fp8 quant_gemv, the fp8 MoE decode kernel, XLA's bf16 dot) over `copies`
  distinct weights (cold: > 256 MB read a call, so HBM) against the same weight `copies` times (hot: L2).
- B "prefetch, then read": per copy, l2_prefetch(w) then [a read of D MB of other data] then the reader on w:
  the reader's time after a prefetch, and the prefetch kernel's own time.
- C "beside a latency chain": L layers of (S tiny dependent dots, then the reader on that layer's weight),
  with and without l2_prefetch(w_l) independent of the chain, under XLA's default and CONCURRENT command-buffer
  scheduling: wall time per call (many async calls, one sync) and the reader's trace time.

    python3 -m benchmarks.l2_probe --out $OUT        # GPU
    python -m benchmarks.l2_probe --smoke            # CPU: tiny shapes, interpreted, no timing
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from benchmarks.ceilings import measure_read_ceiling, time_async
from benchmarks.device_trace import trace_events
from benchmarks.launch_sweep import fp8_node
from dgjax.pallas.l2_prefetch import kernel as prefetch_kernel
from dgjax.pallas.moe_decode import kernel as moe_kernel
from dgjax.pallas.quant_gemv import kernel as gemv_kernel

COLD_BYTES = 256 << 20
DENSE = {"qwen3 qkv fp8": (2048, 5120, "fp8"), "qwen3 o fp8": (4096, 2048, "fp8"),
         "glm shared gate_up fp8": (4096, 2816, "fp8"), "llama o bf16": (4096, 4096, "bf16"),
         "llama qkv bf16": (4096, 6144, "bf16")}
SMOKE_DENSE = {"smoke fp8": (256, 256, "fp8"), "smoke bf16": (256, 256, "bf16")}


def dense_weights(k: int, n: int, fmt: str, copies: int, seed: int):
    key = jax.random.key(seed)
    out = []
    for c in range(copies):
        w = 0.05 * jax.random.normal(jax.random.fold_in(key, c), (k, n), jnp.float32)
        out.append(fp8_node(w, 0) if fmt == "fp8" else w.astype(jnp.bfloat16))
    return jax.block_until_ready(out)


def reader(fmt: str, interpret: bool):
    if fmt == "fp8":
        return lambda x, w: gemv_kernel.quant_gemv(x, w, interpret=interpret)
    return lambda x, w: x @ w


def weight_bytes(w) -> int:
    return sum(a.nbytes for a in jax.tree.leaves(w))


def main_array(w):
    """The array whose bytes dominate the read (what the prefetch warms)."""
    return w.weight if hasattr(w, "weight") else w


def kernel_us(events: list[dict], match: str) -> list[float]:
    return [e["dur"] for e in events if match in e["name"]]


def traced(fn, args, calls: int) -> list[dict]:
    jax.block_until_ready(fn(*args))

    def run():
        out = None
        for _ in range(calls):
            out = fn(*args)
        jax.block_until_ready(out)
    return trace_events(run)


def biggest(events: list[dict], count: int, skip: tuple[str, ...] = ("l2_prefetch",)) -> list[float]:
    """The `count` longest kernels not named with any of `skip`: a bf16 reader's XLA dot, whatever XLA named it."""
    return sorted((e["dur"] for e in events if not any(s in e["name"] for s in skip)), reverse=True)[:count]


def names(events: list[dict], top: int = 8) -> list[tuple[str, float, int]]:
    """The trace's heaviest kernel names: (name, total µs, count), for the JSON record."""
    tot: dict[str, list] = {}
    for e in events:
        t = tot.setdefault(e["name"], [0.0, 0])
        t[0] += e["dur"]
        t[1] += 1
    return sorted(((n, round(v[0], 1), v[1]) for n, v in tot.items()), key=lambda r: -r[1])[:top]


def stat(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f}" if xs else "-"


def part_a_b(shapes: dict, gpu: bool, calls: int, programs: int, disturb_mb: tuple[int, ...], rows: list) -> None:
    interp = not gpu
    for case, (k, n, fmt) in shapes.items():
        one = weight_bytes(dense_weights(k, n, fmt, 1, 0)[0])
        copies = max(2, math.ceil(COLD_BYTES / one)) if gpu else 2
        ws = dense_weights(k, n, fmt, copies, 1)
        x = jax.random.normal(jax.random.key(2), (1, k), jnp.float32).astype(jnp.bfloat16)
        read = reader(fmt, interp)
        cold = jax.jit(lambda a, ws_: tuple(read(a, w) for w in ws_))
        hot = jax.jit(lambda a, w: tuple(read(a, w) for _ in range(copies)))

        def reader_us(ev, skip=("l2_prefetch",)):
            if fmt == "fp8":
                return kernel_us(ev, "quant_gemv")
            return biggest(ev, calls * copies, skip)
        for label, fn, args in (("cold", cold, (x, ws)), ("hot", hot, (x, ws[0]))):
            ev = traced(fn, args, calls) if gpu else []
            us = reader_us(ev)
            rows.append(dict(part="A", case=case, mode=label, reader_us=stat(us), mb=one / 1e6, kernels=names(ev),
                             tbps=f"{one / 1e6 / statistics.median(us):.2f}" if us else "-"))
            print(rows[-1], flush=True)
        for d in disturb_mb:
            junk = [jnp.ones((max(1, d) << 19,), jnp.bfloat16) * c for c in range(copies)] if d else None

            def pre_read(a, ws_, junk_, d=d):
                outs = []
                for i, w in enumerate(ws_):
                    p = prefetch_kernel.l2_prefetch(main_array(w), programs=programs, interpret=interp)
                    if d:
                        p = (p, jnp.sum(junk_[i], dtype=jnp.float32))
                    a_i, _ = lax.optimization_barrier((a, p))
                    outs.append(read(a_i, w))
                return tuple(outs)
            fn = jax.jit(pre_read)
            ev = traced(fn, (x, ws, junk), calls) if gpu else []
            if not gpu:
                fn(x, ws, junk)
            us = reader_us(ev, ("l2_prefetch", "reduce"))
            pre = kernel_us(ev, "l2_prefetch")
            rows.append(dict(part="B", case=case, mode=f"prefetched, then {d} MB other", reader_us=stat(us),
                             prefetch_us=stat(pre), mb=one / 1e6, kernels=names(ev),
                             tbps=f"{one / 1e6 / statistics.median(us):.2f}" if us else "-",
                             prefetch_tbps=f"{main_array(ws[0]).nbytes / 1e6 / statistics.median(pre):.2f}"
                             if pre else "-"))
            print(rows[-1], flush=True)
            del junk
        del ws


def part_c(shapes: dict, gpu: bool, calls: int, programs: int, chain: int, rows: list) -> None:
    interp = not gpu
    for case, (k, n, fmt) in shapes.items():
        one = weight_bytes(dense_weights(k, n, fmt, 1, 0)[0])
        layers = max(2, min(48, math.ceil(COLD_BYTES / one))) if gpu else 2
        ws = dense_weights(k, n, fmt, layers, 3)
        smalls = [0.1 * jax.random.normal(jax.random.key(10 + j), (128, 128), jnp.float32).astype(jnp.bfloat16)
                  for j in range(chain)]
        x = jax.random.normal(jax.random.key(2), (1, k), jnp.float32).astype(jnp.bfloat16)
        read = reader(fmt, interp)

        def model(a, ws_, sm, prefetch):
            h = a
            for w in ws_:
                p = prefetch_kernel.l2_prefetch(main_array(w), programs=programs, interpret=interp) if prefetch else None
                s = h[:, :128]
                for m in sm:
                    s = jnp.tanh(s @ m)
                h = h.at[:, :128].add(s)
                if prefetch:
                    h, _ = lax.optimization_barrier((h, p))
                y = read(h, w)
                h = h + jnp.mean(y.astype(jnp.float32), axis=1, keepdims=True).astype(h.dtype)
            return h

        for sched in ("xla", "CONCURRENT"):
            opts = {} if sched == "xla" else {"xla_gpu_command_buffer_scheduling_mode": sched}
            for prefetch in (False, True):
                fn = jax.jit(lambda a, ws_, sm, pf=prefetch: model(a, ws_, sm, pf))
                compiled = fn.lower(x, ws, smalls).compile(compiler_options=opts or None)
                if not gpu:
                    compiled(x, ws, smalls)
                    rows.append(dict(part="C", case=case, mode=f"{sched} prefetch={prefetch}", layers=layers))
                    continue
                wall = time_async(lambda: compiled(x, ws, smalls), calls=20, repeats=5).median_s
                ev = traced(compiled, (x, ws, smalls), calls)
                us = kernel_us(ev, "quant_gemv") if fmt == "fp8" else biggest(ev, calls * layers)
                pre = kernel_us(ev, "l2_prefetch")
                rows.append(dict(part="C", case=case, mode=f"{sched} prefetch={prefetch}", layers=layers,
                                 wall_us_per_layer=f"{wall * 1e6 / layers:.2f}", reader_us=stat(us),
                                 prefetch_us=stat(pre), kernels_per_layer=f"{len(ev) / calls / layers:.1f}",
                                 kernels=names(ev)))
                print(rows[-1], flush=True)


def moe_hot_cold(gpu: bool, calls: int, rows: list) -> None:
    """qwen3-30b-a3b's fp8 experts, one token on 8 experts: cold (each call its own 8 experts) vs hot."""
    e, h, f, top_k = (128, 2048, 768, 8) if gpu else (8, 256, 128, 2)
    key = jax.random.key(5)
    dense = [0.05 * jax.random.normal(jax.random.fold_in(key, i), s, jnp.float32)
             for i, s in enumerate(((e, h, f), (e, h, f), (e, f, h)))]
    ws = tuple(fp8_node(w, 1) for w in dense)
    del dense
    copies = e // top_k
    ids = [jnp.arange(c * top_k, (c + 1) * top_k, dtype=jnp.int32)[None].repeat(2, 0) for c in range(copies)]
    wts = jax.nn.softmax(jax.random.normal(jax.random.fold_in(key, 7), (2, top_k)), -1)
    x = jax.random.normal(jax.random.fold_in(key, 9), (2, h), jnp.float32).astype(jnp.bfloat16)
    fn = jax.jit(lambda a, w, ii, r: tuple(moe_kernel.moe_decode(a, i, r, *w, interpret=not gpu) for i in ii))
    for label, ii in (("cold", ids), ("hot", [ids[0]] * copies)):
        ev = traced(fn, (x, ws, ii, wts), calls) if gpu else []
        if not gpu:
            fn(x, ws, ii, wts)
        for stage in ("gate_up", "down"):
            us = kernel_us(ev, f"moe_{stage}")
            rows.append(dict(part="A", case=f"qwen3 experts fp8 {stage}", mode=label, reader_us=stat(us),
                             kernels=names(ev)))
            print(rows[-1], flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--out", default=None)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--programs", type=int, default=32)
    p.add_argument("--chain", type=int, default=8)
    p.add_argument("--disturb-mb", default="0,8,32")
    p.add_argument("--parts", default="a,b,c,moe")
    args = p.parse_args(argv)
    gpu = jax.default_backend() == "gpu" and not args.smoke
    shapes = DENSE if gpu else SMOKE_DENSE
    parts = set(args.parts.split(","))
    rows: list[dict] = []
    t0 = time.perf_counter()
    if gpu:
        ceiling = measure_read_ceiling(2 << 30).bytes_per_s
        print(f"read ceiling {ceiling / 1e12:.3f} TB/s", flush=True)
        rows.append(dict(part="ceiling", tbps=f"{ceiling / 1e12:.3f}"))
    disturb = tuple(int(d) for d in args.disturb_mb.split(",") if d) if "b" in parts else ()
    if parts & {"a", "b"}:
        part_a_b(shapes, gpu, args.calls, args.programs, disturb, rows)
    if "moe" in parts:
        moe_hot_cold(gpu, args.calls, rows)
    if "c" in parts:
        part_c(shapes, gpu, args.calls, args.programs, args.chain, rows)
    print(f"\n# l2 probe ({time.perf_counter() - t0:.0f} s, {jax.devices()[0].device_kind})")
    keys = ["part", "case", "mode", "reader_us", "tbps", "prefetch_us", "prefetch_tbps", "wall_us_per_layer",
            "kernels_per_layer"]
    print("| " + " | ".join(keys) + " |")
    for r in rows:
        print("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "l2_probe.json"), "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
