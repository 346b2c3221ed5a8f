"""Decode and prefill throughput of dgjax at real model shapes, against the device's measured ceilings.

    python -m benchmarks.decode_bench --preset llama-3.1-8b --preset qwen3-8b --out DIR

One run: measure the HBM read ceiling and the bf16 matmul rate; then per preset build an engine on
random weights (`load_format="dummy"`), decode through the real engine at every (context, concurrency)
and time cold prefills; write `<out>/<date>-<preset>-<device>.md` and `.json` (rewritten after every
case, so a run cut short keeps what it measured) and print a short table last.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import logging
import math
import os
import shlex
import sys
import tempfile
import time

import jax
import numpy as np

from benchmarks import gpu_state, report, roofline
from benchmarks.ceilings import measure_matmul_ceiling, measure_read_ceiling
from benchmarks.device_trace import graph_updates, steady_tick_stats, trace_events
from benchmarks.engine_runs import BenchEngine, decode_max_tokens, engine_config, plan_engines
from benchmarks.presets import PRESETS, write_model_dir
from benchmarks.traces import greedy_fingerprint
from dgjax.config import ModelConfig
from dgjax.models.batch import resolve_kv_cache_dtype
from dgjax.models.params import resolve_dtype

GPU_CEILING_BYTES = 8_589_934_592  # 8 GiB of bf16, far beyond any cache
CPU_CEILING_BYTES = 1 << 26
GPU_MATMUL_SIZE = 8192
CPU_MATMUL_SIZE = 512

# The plain-jnp path of --reference: reference attention, separate q/k/v and gate/up projections.
REFERENCE_ENV = {"DGJAX_ATTENTION": "ref", "DGJAX_FUSE_PROJECTIONS": "0"}

NOTES = [
    "Attention path: `DGJAX_ATTENTION` (default auto). On the GPU, decode (T=1) runs the Pallas "
    "paged decode kernel (dgjax/pallas/paged_attention/kernel.py), whose reads follow each row's real "
    "context, and prefill chunks the Pallas paged prefill kernel (dgjax/pallas/paged_prefill). q/k/v "
    "and gate/up run as one GEMM each (dgjax/models/fused.py). The 'reference path' table (--reference) "
    "is the same engine with the plain-jnp attention and separate projections "
    "(DGJAX_ATTENTION=ref DGJAX_FUSE_PROJECTIONS=0), decoded in the same run.",
    "Decode: C streams with random prompts of `context` tokens, greedy, ignore_eos, fixed max_tokens, all "
    "submitted at once. Timestamps are the engine's output callbacks. The steady window runs from the "
    "last stream's first token (all prefills done) to the first stream's last token; ms/step is the "
    "median over streams of each stream's token interval inside it, tok/s total = streams / (ms/step). "
    "Prefill time is excluded; 'dispatch ms/tick' is the median interval between the engine's decode "
    "dispatches in the same window, a cross-check; 'SM MHz before / after': nvidia-smi's SM clock read "
    "right before and after the window, which follows --warm-s seconds of device work (benchmarks/gpu_state.py: "
    "an idle H200 drops to 345 MHz); 'host ms/dispatch' is the median host time inside one "
    "dispatch (layout, sampling tensors, the executable call), the rest of the interval being the engine "
    "waiting on and processing the previous tick.",
    "GB/step needed = every weight once (the embedding table only for the looked-up rows; MoE: only the "
    "routed experts the step's tokens touch, the expected distinct experts per layer under uniform "
    "routing, and no MTP layers) + the K/V of "
    "every stream up to its context (mean over the window). TB/s = that over ms/step; 'of ceiling' = "
    "TB/s over the read ceiling measured at the start of this run; roofline ms = GB/step over the ceiling.",
    "device ms/step and device-idle share: each decode case runs a second time (`--trace-tokens` "
    "steady ticks) under the JAX profiler; over the steady ticks of that trace (cut by the decode "
    "attention kernels, one per layer per tick) device ms/step is the time some kernel ran per tick and "
    "the idle share is 1 - busy / elapsed: launch gaps between kernels plus any wait on the host. "
    "Under the profiler every kernel node of the tick's CUDA graph is recorded, which widens the gaps (qwen3-"
    "30b-a3b fp8, ~770 kernels a tick: 30-70% idle there while its untraced step took no longer than the "
    "traced kernels' busy time), so 'idle share, untraced' is 1 - device ms/step / ms/step (floored at 0): "
    "the untraced run's step against the traced run's kernel time, what the host adds to a step. "
    "(benchmarks/device_trace.py; GPU only, n/a on CPU.)",
    "'ref attention gathers' is the K/V volume the plain-jnp reference would copy per step (every "
    "row's whole block table, max_model_len keys, padded rows included); the decode kernel does not "
    "read it. The prefill chunk's reference attention does span the whole block table ([heads, "
    "chunk, max_model_len] float32 scores per layer): that is why a 32K prompt (32K table) prefills "
    "at a third of the rate of 2K/8K prompts (8K table).",
    "Prefill: one request at a time, fresh random ids, prefix cache off, max_tokens 1; TTFT from submit "
    "to the first output callback. A prompt runs as ceil(len / chunk) chunks of the one compiled chunk "
    "size (a shorter prompt is padded to the chunk). Useful TFLOP counts projections, MLP, causal "
    "attention and one lm_head row; 'of matmul ceiling' compares with the bf16 matmul rate measured here.",
    "The tokenizer is tiny-chat's (2048 ids); generated ids beyond it decode to empty text (the "
    "`tokenizers` library skips unknown ids), so the detokenizer never emits text and, its window never "
    "advancing, re-decodes all of a stream's generated ids each tick: host time that grows with the "
    "output (about 13 µs per stream per tick at 256 tokens on the 2-core dev CPU): host work of every "
    "tick, hidden while the host stays ahead of the device.",
]


def parse_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.decode_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", action="append", choices=sorted(PRESETS),
                   help="model shape (repeatable; default llama-3.1-8b)")
    p.add_argument("--contexts", type=parse_ints, default=[1024, 8192], help="decode prompt lengths")
    p.add_argument("--concurrency", type=parse_ints, default=[1, 4, 16], help="decode streams per run")
    p.add_argument("--prefill", type=parse_ints, default=[2048, 8192, 32768], help="cold prefill lengths")
    p.add_argument("--decode-tokens", type=int, default=128,
                   help="ticks every stream of a run decodes together (the steady window)")
    p.add_argument("--prefill-chunk", type=int, default=2048, help="the engine's one prefill bucket")
    p.add_argument("--page-size", type=int, default=16)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--prefill-repeats", type=int, default=1)
    p.add_argument("--trace-tokens", type=int, default=40,
                   help="steady ticks of the second, profiled run of each decode case (device time, idle share)")
    p.add_argument("--kv-cache-dtype", default="auto", help="auto | bfloat16 | fp8_e4m3")
    p.add_argument("--quantize", default="none",
                   help="convert the random weights at load: none | fp8 | nvfp4 | nvfp4-experts | fp8+nvfp4-experts | bf12")
    p.add_argument("--reference", action="store_true",
                   help="also decode at the first context with C=1 and the largest C through the plain-jnp "
                        "path (reference attention, unfused projections) for the kernels' speedup")
    p.add_argument("--ceiling-bytes", type=int, default=None,
                   help=f"read-ceiling array size (default {GPU_CEILING_BYTES} on GPU, {CPU_CEILING_BYTES} on CPU)")
    p.add_argument("--matmul-size", type=int, default=None,
                   help=f"matmul ceiling size (default {GPU_MATMUL_SIZE} on GPU, {CPU_MATMUL_SIZE} on CPU)")
    p.add_argument("--decode-buckets", type=parse_ints, default=None,
                   help="compile these decode widths instead of the measured concurrencies "
                        "(e.g. 2,4,16 runs one stream in the width-2 executable)")
    p.add_argument("--split-engines", action="store_true",
                   help="decode on an engine sized for the decode contexts only, long prefills on a second "
                        "one (costs a second compile; avoids the reference attention's full-table reads)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds any one run may take")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warm-s", type=float, default=1.0,
                   help="seconds of device work right before each decode window (GPU only; benchmarks/gpu_state.py)")
    p.add_argument("--out", default="benchmarks/results", help="folder for the .md and .json results")
    args = p.parse_args(argv)
    args.preset = args.preset or ["llama-3.1-8b"]
    return args


class Progress:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def __call__(self, msg: str) -> None:
        print(f"[{time.perf_counter() - self.t0:7.1f}s] {msg}", flush=True)


def device_bytes_in_use() -> int | None:
    stats = jax.devices()[0].memory_stats() if hasattr(jax.devices()[0], "memory_stats") else None
    return (stats or {}).get("bytes_in_use")


def model_facts(cfg: ModelConfig, hf: dict, dtype) -> dict:
    return {
        "architecture": cfg.architecture, "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
        "heads": cfg.num_attention_heads, "kv_heads": cfg.num_key_value_heads, "head_dim": cfg.head_dim,
        "ffn": cfg.intermediate_size, "vocab": cfg.vocab_size, "dtype": str(np.dtype(dtype)),
        "param_bytes": roofline.param_bytes(cfg, dtype),
        "kv_bytes_per_token": roofline.kv_bytes_per_token(cfg, dtype),
        "hf_config": hf,
    }


def kv_dtype(args, dtype):
    return resolve_kv_cache_dtype(args.kv_cache_dtype, dtype)


def decode_row(be: BenchEngine, cfg: ModelConfig, dtype, args, ceiling: float, context: int,
               concurrency: int, rng: np.random.Generator, log: Progress) -> dict:
    max_tokens = decode_max_tokens(context, concurrency, args.decode_tokens, args.prefill_chunk)
    gpu_state.spin(args.warm_s)  # the clocks up before the window (gpu_state's docstring)
    clocks = {"before": gpu_state.clocks_mhz()}
    t0 = time.perf_counter()
    window, streams, dispatch_ms = be.decode(rng, context, concurrency, max_tokens, args.timeout)
    clocks["after"] = gpu_state.clocks_mhz()
    host_ms = be.recorder.dispatch_host_ms(window.start, window.end, concurrency)
    wall = time.perf_counter() - t0
    gpu_state.spin(args.warm_s)
    host: list[dict] = []
    traced = trace_events(lambda: be.decode(
        rng, context, concurrency,
        decode_max_tokens(context, concurrency, min(args.trace_tokens, args.decode_tokens), args.prefill_chunk),
        args.timeout), host_out=host)
    updates = {"graphs": graph_updates(host), "decode_dispatches": len(be.recorder.dispatches)}
    ticks = steady_tick_stats(traced, cfg.num_hidden_layers, min(args.trace_tokens, args.decode_tokens))
    weights = roofline.decode_weight_bytes_of(be.engine._loaded.params, cfg, concurrency)
    kv = roofline.decode_kv_bytes(cfg, kv_dtype(args, dtype), window.mean_context * concurrency)
    step_bytes = weights + kv
    ms = window.ms_per_step
    device_ms = ticks.busy_ms_per_tick if ticks else None
    row = {
        "context": context, "concurrency": concurrency, "max_tokens": max_tokens,
        "window_s": window.seconds, "window_tokens": window.tokens, "mean_context": window.mean_context,
        "stream_ms_per_step": [1e3 * x for x in window.step_s],
        "ms_per_step": ms, "tok_s_per_stream": window.per_stream_tok_s, "tok_s_aggregate": window.aggregate_tok_s,
        "dispatch_ms_per_tick": dispatch_ms, "host_ms_per_dispatch": host_ms,
        "weight_bytes": weights, "kv_bytes": kv, "bytes_per_step": step_bytes,
        "bytes_per_s": step_bytes / (ms / 1e3), "frac_ceiling": step_bytes / (ms / 1e3) / ceiling,
        "roofline_ms": 1e3 * step_bytes / ceiling,
        "device_ms_per_step": device_ms,
        "device_frac_ceiling": step_bytes / (device_ms / 1e3) / ceiling if ticks else None,
        "idle_share": ticks.idle_share if ticks else None,
        "untraced_idle_share": max(0.0, 1 - device_ms / ms) if ticks else None,
        "traced_ticks": dataclasses.asdict(ticks) if ticks else None,
        "traced_graph_updates": updates,
        "ref_gather_bytes": roofline.ref_attention_gather_bytes(
            cfg, dtype, concurrency, be.max_model_len, args.page_size),
        "engine_max_model_len": be.max_model_len, "wall_s": wall, "warm_s": args.warm_s, "clocks_mhz": clocks,
        "greedy_tokens": [s.token_ids for s in streams], "greedy_sha1": greedy_fingerprint(streams),
    }
    log(f"decode ctx={context} C={concurrency}: {ms:.2f} ms/step engine, {ticks} device, "
        f"{window.aggregate_tok_s:.1f} tok/s total, {100 * row['frac_ceiling']:.1f}% of ceiling ({wall:.1f} s)")
    return row


def prefill_row(be: BenchEngine, cfg: ModelConfig, args, matmul: float, prompt_tokens: int,
                rng: np.random.Generator, log: Progress) -> dict:
    ttfts = [be.prefill(rng, prompt_tokens, args.timeout).ttft_s for _ in range(args.prefill_repeats)]
    ttft = float(np.median(ttfts))
    chunks = math.ceil(prompt_tokens / args.prefill_chunk)
    flops = roofline.prefill_flops(cfg, prompt_tokens)
    row = {
        "prompt_tokens": prompt_tokens, "chunk": args.prefill_chunk, "chunks": chunks,
        "ttft_s": ttft, "ttft_samples_s": ttfts, "tok_s": prompt_tokens / ttft, "ms_per_chunk": 1e3 * ttft / chunks,
        "flops": flops, "flops_per_s": flops / ttft, "frac_matmul": flops / ttft / matmul,
        "engine_max_model_len": be.max_model_len,
    }
    log(f"prefill {prompt_tokens} tokens: TTFT {ttft:.3f} s, {row['tok_s']:.0f} tok/s, "
        f"{row['flops_per_s'] / 1e12:.1f} TFLOP/s")
    return row


def run_preset(preset: str, args, base: dict, log: Progress) -> tuple[dict, str]:
    rng = np.random.default_rng(args.seed)
    t_preset = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"dgjax-bench-{preset}-") as model_dir:
        write_model_dir(preset, model_dir)
        cfg = ModelConfig.from_dir(model_dir)
        dtype = resolve_dtype(cfg.torch_dtype, args.dtype)
        ceiling = base["ceiling"]["read_bytes_per_s"]
        matmul = base["ceiling"]["matmul_flops_per_s"]
        result = dict(base, preset=preset, model=model_facts(cfg, PRESETS[preset], dtype),
                      engines=[], decode=[], prefill=[], errors=[], notes=NOTES, timings=dict(base["timings"]))
        label = preset if args.quantize == "none" else f"{preset}-{args.quantize.replace('+', '-')}"
        label = label if args.kv_cache_dtype == "auto" else f"{label}-kv-{args.kv_cache_dtype}"
        result["quantize"] = args.quantize
        result["kv_cache_dtype"] = str(kv_dtype(args, dtype))
        result["reference"] = []
        stem = report.result_stem(args.out, result["date"], label, report.platform_slug(base["machine"]["device_kind"]))
        plans = plan_engines(
            args.contexts, args.concurrency, args.prefill, decode_tokens=args.decode_tokens,
            chunk=args.prefill_chunk, page_size=args.page_size,
            replay_steps=2, split=args.split_engines,
        )
        if args.reference:
            ref_plan = plan_engines([args.contexts[0]], sorted({1, max(args.concurrency)}), [],
                                    decode_tokens=args.decode_tokens, chunk=args.prefill_chunk,
                                    page_size=args.page_size, replay_steps=2, split=False)[0]
            plans = plans + [dataclasses.replace(ref_plan, reference=True)]
        for i, plan in enumerate(plans):
            log(f"{preset}: engine {i + 1}/{len(plans)}: max_model_len {plan.max_model_len}, "
                f"{plan.num_pages} pages, decode buckets {plan.decode_buckets}")
            if args.decode_buckets:
                plan = dataclasses.replace(plan, decode_buckets=tuple(args.decode_buckets),
                                           max_concurrency=max(plan.max_concurrency, *args.decode_buckets))
            config = engine_config(plan, dtype=args.dtype, page_size=args.page_size,
                                   chunk=args.prefill_chunk, seed=args.seed, kv_cache_dtype=args.kv_cache_dtype,
                                   quantize=args.quantize)
            saved_env = {k: os.environ.get(k) for k in REFERENCE_ENV}
            if plan.reference:  # read when the engine loads (fusion) and traces (attention)
                os.environ.update(REFERENCE_ENV)
            be = BenchEngine(model_dir, config, log)
            try:
                log(f"{preset}: engine ready in {be.startup_s:.1f} s ({be.compile_summary})")
                result["timings"][f"{preset} engine {i + 1} load + compile"] = be.startup_s
                result["engines"].append({
                    **{k: getattr(plan, k) for k in ("max_model_len", "num_pages", "decode_cases", "prefill_cases")},
                    "decode_buckets": list(plan.decode_buckets), "page_size": args.page_size,
                    "prefill_chunk": args.prefill_chunk, "startup_s": be.startup_s,
                    "compile_summary": be.compile_summary, "engine_config": dataclasses.asdict(config),
                })
                t0 = time.perf_counter()
                be.warmup(rng, args.timeout)
                result["timings"][f"{preset} engine {i + 1} warmup request"] = time.perf_counter() - t0
                for context, concurrency in plan.decode_cases:
                    row = decode_row(be, cfg, dtype, args, ceiling, context, concurrency, rng, log)
                    result["reference" if plan.reference else "decode"].append(row)
                    report.write_result(result, stem)
                for prompt_tokens in plan.prefill_cases:
                    result["prefill"].append(prefill_row(be, cfg, args, matmul, prompt_tokens, rng, log))
                    report.write_result(result, stem)
            except Exception as e:  # keep what was measured; the other presets still run
                log(f"{preset}: engine {i + 1} FAILED: {e!r}; skipping its remaining cases")
                result["errors"].append(f"engine {i + 1}: {e!r}")
                report.write_result(result, stem)
            finally:
                for k, v in saved_env.items():
                    os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
                be.close()
                del be
                gc.collect()
                log(f"{preset}: engine {i + 1} closed; device bytes in use: {device_bytes_in_use()}")
    result["decode"].sort(key=lambda d: (d["context"], d["concurrency"]))
    result["prefill"].sort(key=lambda p: p["prompt_tokens"])
    result["timings"][f"{preset} total"] = time.perf_counter() - t_preset
    report.write_result(result, stem)
    log(f"{preset}: wrote {stem}.md and .json")
    return result, stem


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s: %(message)s", force=True)
    log = Progress()
    machine = report.machine_info()
    gpu = machine["platform"] != "cpu"
    log(f"devices: {jax.devices()}; jax {machine['jax']}")
    t0 = time.perf_counter()
    read = measure_read_ceiling(args.ceiling_bytes or (GPU_CEILING_BYTES if gpu else CPU_CEILING_BYTES))
    mm = measure_matmul_ceiling(args.matmul_size or (GPU_MATMUL_SIZE if gpu else CPU_MATMUL_SIZE))
    log(f"read ceiling {read.bytes_per_s / 1e12:.3f} TB/s ({read.bytes_read / 1e9:.2f} GB); "
        f"matmul {mm.flops_per_s / 1e12:.1f} TFLOP/s")
    base = {
        "date": datetime.date.today().isoformat(),
        "command": "python -m benchmarks.decode_bench " + shlex.join(sys.argv[1:] if argv is None else argv),
        "machine": machine,
        "ceiling": {
            "read_bytes": read.bytes_read, "read_bytes_per_s": read.bytes_per_s,
            "read_samples_s": read.seconds.samples_s, "read_calls": read.seconds.calls,
            "matmul_size": mm.size, "matmul_flops_per_s": mm.flops_per_s, "matmul_samples_s": mm.seconds.samples_s,
        },
        "timings": {"ceilings": time.perf_counter() - t0},
    }
    done = [run_preset(preset, args, base, log) for preset in args.preset]
    end = measure_read_ceiling(read.bytes_read)
    log(f"read ceiling at the end: {end.bytes_per_s / 1e12:.3f} TB/s")
    results = []
    for r, stem in done:
        r["ceiling"] = dict(r["ceiling"], read_end_bytes_per_s=end.bytes_per_s, read_end_samples_s=end.seconds.samples_s)
        report.write_result(r, stem)
        results.append(r)
    print(report.summary_table(results), flush=True)
    return results


if __name__ == "__main__":
    sys.exit(1 if any(r["errors"] for r in main()) else 0)
