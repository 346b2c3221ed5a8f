"""Is the decode "slow mode" decided per process or per loaded executable? Several engines, one after another,
in one process, each timed over a few short C1 decode rounds.

Why: since session 13 some benchmark runs are ~8-10% slower with the same kernels (qwen3-30b-a3b fp8 C1: ~2.94
against ~2.66 ms a step), and single-run A/Bs taken in different modes misled earlier sessions (s16). An engine
built anew in the same process deserializes its executables again, so XLA instantiates fresh CUDA graphs: if
the mode changes between engines of a process, it belongs to the loaded engine, else to the process (the CUDA
context), and the environment (e.g. CUDA_DEVICE_MAX_CONNECTIONS, CUDA_MODULE_LOADING) is what to vary across
processes. Found (s19d, s19e): per engine; the first engine of a process was always slow. `--replace` and
`--redraws` move the decode parameters (all, then the state; or one small array, N times) to new buffers and
time direct ticks after each: s20a turned slow engines fast with one small move, s19f kept one slow through the
whole copy (benchmarks/results/2026-12-03-s20-slow-mode-redraw.md).

Each engine also runs its decode executable straight from Python, `--direct` ticks queued back to back with one
sync at the end (no engine loop, the same executable, mailbox and result copies): if that is fast while the
engine's round is slow, the engine's host loop makes the slow mode; if it is slow too, the device does. Each
round reports the median host time a tick spends waiting for the previous tick's result (`wait_ms`) and inside
the dispatch (`dispatch_host_ms`).

Prints one line per round (`round engine=E round=R ms/step=... dispatch=...`) and, with --trace, each engine's
traced launch edges (median gap between a kernel's start and its predecessor's end: negative = early launch).

    python3 -m benchmarks.mode_probe --preset qwen3-30b-a3b --quantize fp8 --engines 3 --rounds 2   # GPU
    python -m benchmarks.mode_probe --preset tiny --engines 2 --rounds 1 --tokens 8                  # CPU smoke
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from benchmarks.ceilings import time_async
from benchmarks.device_trace import launch_mode, steady_tick_stats, trace_events
from benchmarks.engine_runs import BenchEngine, decode_max_tokens, engine_config, plan_engines
from benchmarks.presets import write_model_dir
from dgjax.config import ModelConfig


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="qwen3-30b-a3b")
    p.add_argument("--quantize", default="none")
    p.add_argument("--layers", type=int, default=None, help="override num_hidden_layers (fewer: faster loads)")
    p.add_argument("--engines", type=int, default=3, help="engines built one after another in this process")
    p.add_argument("--rounds", type=int, default=2, help="decode rounds per engine")
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--tokens", type=int, default=160, help="decode tokens per round")
    p.add_argument("--trace", action="store_true", help="trace 8 ticks per engine for the launch edges")
    p.add_argument("--direct", type=int, default=100, help="ticks of the decode executable run outside the engine")
    p.add_argument("--prealloc-gb", type=float, default=0.0,
                   help="allocate and free this many GB on the device before the first engine")
    p.add_argument("--replace", action="store_true",
                   help="after the last round's direct ticks, copy the decode parameters, then the device state, to "
                        "new buffers and time direct ticks after each: whether the mode follows where they lie")
    p.add_argument("--redraws", type=int, default=0,
                   help="after the last round, this many times: move the decode parameters' smallest array to a new "
                        "buffer (XLA then updates the tick's CUDA graph) and time direct ticks: is the mode drawn "
                        "again at each graph update")
    p.add_argument("--out", default=None, help="write every round as JSON lines here")
    return p.parse_args(argv)


def model_dir_for(preset: str, layers: int | None, dest: str) -> str:
    write_model_dir(preset, dest)
    if layers is not None:
        path = os.path.join(dest, "config.json")
        with open(path) as f:
            cfg = json.load(f)
        cfg["num_hidden_layers"] = layers
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2)
    return dest


def edge_medians(be: BenchEngine, cfg: ModelConfig, rng, context: int) -> dict:
    """Median launch gap (µs) per edge kind over 8 traced steady ticks; {} where the trace has none (CPU)."""
    traced = trace_events(lambda: be.decode(rng, context, 1, decode_max_tokens(context, 1, 8, 2048), 600))
    ticks = steady_tick_stats(traced, cfg.num_hidden_layers, 8)
    if ticks is None:
        return {}
    return ({kind: round(median, 3) for kind, _, median, _ in ticks.edges}
            | {"busy_ms": round(ticks.busy_ms_per_tick, 3), "mode": launch_mode(ticks.edges)})


class WaitRecorder:
    """Wraps the engine's result processing: the seconds each call spends in it (waiting for the tick's result
    on the device, then handing tokens out)."""

    def __init__(self, engine) -> None:
        self.engine, self.original, self.spent = engine, engine._process, []
        engine._process = self

    def __call__(self, item):
        t0 = time.perf_counter()
        self.original(item)
        self.spent.append(time.perf_counter() - t0)

    def detach(self) -> None:
        del self.engine._process


def direct_ticks(be: BenchEngine, ticks: int, copies: bool = True) -> float | None:
    """ms a tick of the engine's width-1 decode executable called `ticks` times back to back from this thread,
    one sync at the end: slot 0 (its KV state from the last round) on its first pages. `copies=False` skips the
    device-to-host copy the executor starts after every tick (PJRT ends each with a host callback on its
    transfer stream): whether those copies are what stalls the slow ticks."""
    from dgjax.runtime import executor as executor_module
    from dgjax.runtime import sampler
    from dgjax.runtime.types import SamplingParams

    if ticks <= 0:
        return None
    ex = be.engine._loaded.executor
    width = ex.decode_width(1)
    slot_ids = np.full((width,), ex.pad_slot, np.int32)
    active = np.zeros((width,), np.bool_)
    tables = np.zeros((width, ex.max_pages_per_seq), np.int32)
    slot_ids[0], active[0] = 0, True
    tables[0] = np.arange(ex.max_pages_per_seq, dtype=np.int32)
    dev_slots, dev_active, dev_tables = ex.decode_layout(slot_ids, active, tables)
    layout = (dev_slots, dev_tables, dev_active)  # decode's argument order
    st = ex.put(sampler.build_sampling_tensors([SamplingParams(temperature=0.0)], width,
                                               executor_module.MAX_LOGIT_BIAS, [0]))
    saved = executor_module._start_copy
    if not copies:
        executor_module._start_copy = lambda tree: None
    try:  # one warm tick: any re-record of the graph happens there
        return 1e3 * time_async(lambda: ex.decode(*layout, st, False), calls=ticks, repeats=1, warmup=1).median_s
    finally:
        executor_module._start_copy = saved


def replace_buffers(be: BenchEngine, what: str) -> None:
    """Copy the executor's decode parameters ("params") or device state ("state") to freshly allocated buffers
    and drop the old ones (the copies are made while the originals live, so they land at other addresses)."""
    import jax
    import jax.numpy as jnp

    ex = be.engine._loaded.executor
    old = ex.call_params if what == "params" else ex.state
    new = jax.block_until_ready(jax.tree.map(lambda a: jnp.copy(a), old))
    if what == "params":
        ex.call_params = new
    else:
        ex.state = new
    del old
    gc.collect()


def move_smallest_param(be: BenchEngine) -> None:
    """Copy the smallest array of the executor's decode parameters to a new buffer and drop the old one: the
    cheapest change of an argument address, which makes XLA update the decode tick's CUDA graph. The executor's
    flat calls stay bound to the old parameters, so later ticks go through the compiled call (more host time a
    dispatch; the direct ticks stay device-bound)."""
    import jax
    import jax.numpy as jnp

    ex = be.engine._loaded.executor
    leaves, treedef = jax.tree.flatten(ex.call_params)
    i = min(range(len(leaves)), key=lambda j: leaves[j].size)
    leaves[i] = jnp.copy(leaves[i]).block_until_ready()
    ex.call_params = jax.tree.unflatten(treedef, leaves)


def last_round_probes(be: BenchEngine, args) -> dict:
    """The direct-tick timings taken after an engine's last round, in order: with and without the result copies,
    then (--replace) after the parameters and after the state move, then (--redraws) after each small move."""
    def timed(copies: bool = True):
        ms = direct_ticks(be, args.direct, copies)
        return None if ms is None else round(ms, 4)

    out = {key: timed(copies) for key, copies in
           (("direct_ms", True), ("direct_nocopy_ms", False), ("direct_ms_again", True))}
    if args.replace:
        for what in ("params", "state"):
            replace_buffers(be, what)
            out[f"direct_new_{what}_ms"] = timed()
    if args.redraws:
        redraws = []
        for _ in range(args.redraws):
            move_smallest_param(be)
            redraws.append(timed())
        out["direct_redraws_ms"] = redraws
    return out


def main(argv=None) -> list[dict]:
    args = parse_args(argv)
    rng = np.random.default_rng(0)
    rows: list[dict] = []
    env = {k: os.environ.get(k) for k in ("CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING", "XLA_FLAGS")}
    print(f"mode_probe: pid {os.getpid()} env {env}", flush=True)
    if args.prealloc_gb > 0:
        import jax.numpy as jnp

        big = jnp.ones((int(args.prealloc_gb * 1e9) // 4,), jnp.float32).block_until_ready()
        del big
    with tempfile.TemporaryDirectory(prefix="dgjax-mode-") as d:
        model_dir = model_dir_for(args.preset, args.layers, d)
        cfg = ModelConfig.from_dir(model_dir)
        plan = plan_engines([args.context], [1], [], decode_tokens=args.tokens, chunk=2048, page_size=16,
                            replay_steps=2, split=False)[0]
        config = engine_config(plan, dtype="auto", page_size=16, chunk=2048, seed=0, kv_cache_dtype="auto",
                               quantize=args.quantize)
        for e in range(args.engines):
            t0 = time.perf_counter()
            be = BenchEngine(model_dir, config, lambda m: None)
            waits = WaitRecorder(be.engine)
            try:
                be.warmup(rng, 600)
                startup = time.perf_counter() - t0
                for r in range(args.rounds):
                    max_tokens = decode_max_tokens(args.context, 1, args.tokens, 2048)
                    waits.spent = []
                    window, _, dispatch_ms = be.decode(rng, args.context, 1, max_tokens, 600)
                    host_ms = be.recorder.dispatch_host_ms(window.start, window.end, 1)
                    row = {"pid": os.getpid(), "engine": e, "round": r, "ms_per_step": round(window.ms_per_step, 4),
                           "dispatch_ms": None if dispatch_ms is None else round(dispatch_ms, 4),
                           "dispatch_host_ms": None if host_ms is None else round(host_ms, 3),
                           "wait_ms": round(1e3 * statistics.median(waits.spent), 3) if waits.spent else None,
                           "startup_s": round(startup, 1), "cache": be.compile_summary}
                    if r == args.rounds - 1:
                        row.update(last_round_probes(be, args))
                    if args.trace and r == args.rounds - 1:
                        row["edges"] = edge_medians(be, cfg, rng, args.context)
                    rows.append(row)
                    print("round " + " ".join(f"{k}={v}" for k, v in row.items()), flush=True)
            finally:
                waits.detach()
                be.close()
                del be
                gc.collect()
    steps = [r["ms_per_step"] for r in rows]
    print(f"mode_probe: {len(rows)} rounds, ms/step min {min(steps):.3f} median {statistics.median(steps):.3f} "
          f"max {max(steps):.3f}", flush=True)
    if args.out:
        with open(args.out, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
