"""Where a decode step's time goes: a device trace of the real engine, summed per kernel.

Runs one stream (or C streams) through the engine on random weights, captures a JAX profiler trace
of a steady stretch of decode ticks, and prints the kernels that take the time, the device-busy
share of the traced wall time (1 - busy share is the device-idle share the issue asks about), and
kernel launches per tick. Reads the Perfetto JSON trace that `jax.profiler` writes, so nothing
beyond jax is needed.

    python -m benchmarks.profile_decode --preset llama-3.1-8b --concurrency 1 --out $OUT
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import tempfile
import time

import numpy as np

from benchmarks.device_trace import busy_us, device_events, steady_tick_stats
from benchmarks.engine_runs import BenchEngine
from benchmarks.presets import write_model_dir
from dgjax.config import EngineConfig


def summarize(trace_path: str, ticks: int, top: int, layers: int) -> str:
    events = device_events(trace_path)
    if not events:
        return f"no device events found in {trace_path}"
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    by_name: dict[str, list[float]] = collections.defaultdict(list)
    for e in events:
        by_name[e["name"]].append(e["dur"])
    busy = busy_us(events, start, end)
    wall = end - start
    lines = [f"traced {wall / 1e3:.2f} ms of device time line, busy {busy / 1e3:.2f} ms "
             f"({100 * busy / wall:.1f}%), idle share {100 * (1 - busy / wall):.1f}%; "
             f"{len(events)} kernels ({len(events) / max(ticks, 1):.0f} per tick over {ticks} ticks)",
             f"steady decode ticks: {steady_tick_stats(events, layers)}",
             f"{'kernel':70s} {'calls':>6s} {'total ms':>9s} {'us/call':>8s} {'share':>6s}"]
    total = sum(sum(v) for v in by_name.values())
    for name, durs in sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:top]:
        lines.append(f"{name[:70]:70s} {len(durs):6d} {sum(durs) / 1e3:9.2f} {np.mean(durs):8.1f} "
                     f"{100 * sum(durs) / total:5.1f}%")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="llama-3.1-8b")
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--quantize", default="none", help="load-time weight conversion (EngineConfig.quantize)")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--ticks", type=int, default=30)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--out", default=None)
    p.add_argument("--hlo-dump", action="store_true",
                   help="dump the optimized HLO and print what each top kernel fuses (to <out>/fusions.txt)")
    a = p.parse_args()
    dump_dir = tempfile.mkdtemp(prefix="dgjax-hlo-") if a.hlo_dump else None
    if dump_dir:  # read when the backend starts, i.e. before the first computation
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_dump_to={dump_dir} --xla_dump_hlo_as_text").strip()
    import jax

    out = a.out or tempfile.mkdtemp(prefix="dgjax-profile-")
    model_dir = write_model_dir(a.preset, tempfile.mkdtemp(prefix="dgjax-model-"))
    mml = a.context + 4 * a.ticks + 64
    cfg = EngineConfig(dtype="bfloat16", kv_cache_dtype=a.kv_cache_dtype, quantize=a.quantize,
                       load_format="dummy", max_model_len=mml,
                       max_concurrency=max(a.concurrency, 2), decode_buckets=(a.concurrency,),
                       prefill_buckets=(256,), enable_prefix_cache=False, aot_logprob_variants=False,
                       # a dump needs a real compile: an empty cache dir, so nothing loads from the disk cache
                       compilation_cache_dir=tempfile.mkdtemp(prefix="dgjax-xla-") if dump_dir else None)
    be = BenchEngine(model_dir, cfg, print)
    be_layers = be.engine.model_config.num_hidden_layers
    rng = np.random.default_rng(0)
    try:
        # a first run compiles nothing new but warms every path; the traced run decodes 4x ticks
        be.decode(rng, a.context, a.concurrency, 8, timeout_s=300)
        trace_dir = os.path.join(out, "trace")
        prompts = be.prompts(rng, a.concurrency, a.context)
        jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
        t0 = time.perf_counter()
        be.decode(rng, a.context, a.concurrency, 4 * a.ticks, timeout_s=300)
        jax.profiler.stop_trace()
        print(f"traced run took {time.perf_counter() - t0:.2f} s wall", flush=True)
        del prompts
    finally:
        be.close()
    paths = sorted(glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"), recursive=True))
    if not paths:
        raise SystemExit(f"no perfetto trace under {trace_dir}")
    table = summarize(paths[-1], 4 * a.ticks, a.top, be_layers)
    print(table, flush=True)
    if dump_dir:
        from benchmarks.hlo_fusions import describe

        names = [ln.split()[0] for ln in table.splitlines()[3:]]
        text = "\n\n".join(describe(dump_dir, n, prefer="decode") for n in names)
        with open(os.path.join(out, "fusions.txt"), "w") as f:
            f.write(text + "\n")
        print(text, flush=True)


if __name__ == "__main__":
    main()
