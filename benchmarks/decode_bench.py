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
import shlex
import sys
import tempfile
import time

import jax
import numpy as np

from benchmarks import report, roofline
from benchmarks.ceilings import measure_matmul_ceiling, measure_read_ceiling
from benchmarks.engine_runs import BenchEngine, decode_max_tokens, engine_config, plan_engines
from benchmarks.presets import PRESETS, write_model_dir
from dgjax.config import ModelConfig
from dgjax.models.params import resolve_dtype

GPU_CEILING_BYTES = 8_589_934_592  # 8 GiB of bf16, far beyond any cache
CPU_CEILING_BYTES = 1 << 26
GPU_MATMUL_SIZE = 8192
CPU_MATMUL_SIZE = 512

NOTES = [
    "Attention path: `DGJAX_ATTENTION` (default auto). On the GPU, decode (T=1) runs the Pallas "
    "paged decode kernel (dgjax/pallas/paged_attention/kernel.py), whose reads follow each row's real "
    "context; prefill chunks run the plain-jnp reference. `python -m benchmarks.kernel_check` times "
    "the kernel against the reference at these shapes in one run.",
    "Decode: C streams with random prompts of `context` tokens, greedy, ignore_eos, fixed max_tokens, all "
    "submitted at once. Timestamps are the engine's output callbacks. The steady window runs from the "
    "last stream's first token (all prefills done) to the first stream's last token; ms/step is the "
    "median over streams of each stream's token interval inside it, tok/s total = streams / (ms/step). "
    "Prefill time is excluded; 'dispatch ms/tick' is the median interval between the engine's decode "
    "dispatches in the same window, a cross-check.",
    "GB/step needed = every weight once (the embedding table only for the looked-up rows) + the K/V of "
    "every stream up to its context (mean over the window). TB/s = that over ms/step; 'of ceiling' = "
    "TB/s over the read ceiling measured at the start of this run; roofline ms = GB/step over the ceiling.",
    "device ms/step: the same compiled decode executable (the last tick with every stream active) "
    "replayed back-to-back on device-resident inputs with the engine thread stopped, median of several "
    "(async calls + one sync). device-idle share = 1 - device ms/step / engine ms/step: the host's part "
    "of a tick (scheduling, input transfers, result read-back, detokenization) that the device waits on.",
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
    p.add_argument("--replay-calls", type=int, default=8, help="async calls per replay repeat")
    p.add_argument("--replay-repeats", type=int, default=5)
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


def decode_row(be: BenchEngine, cfg: ModelConfig, dtype, args, ceiling: float, context: int,
               concurrency: int, rng: np.random.Generator, log: Progress) -> dict:
    max_tokens = decode_max_tokens(context, concurrency, args.decode_tokens, args.prefill_chunk)
    t0 = time.perf_counter()
    window, _, dispatch_ms = be.decode(rng, context, concurrency, max_tokens, args.timeout)
    wall = time.perf_counter() - t0
    replay = be.replay_full_tick(args.replay_calls, args.replay_repeats)
    weights = roofline.decode_weight_bytes(cfg, dtype, concurrency)
    kv = roofline.decode_kv_bytes(cfg, dtype, window.mean_context * concurrency)
    step_bytes = weights + kv
    ms = window.ms_per_step
    device_ms = 1e3 * replay.median_s
    row = {
        "context": context, "concurrency": concurrency, "max_tokens": max_tokens,
        "window_s": window.seconds, "window_tokens": window.tokens, "mean_context": window.mean_context,
        "stream_ms_per_step": [1e3 * x for x in window.step_s],
        "ms_per_step": ms, "tok_s_per_stream": window.per_stream_tok_s, "tok_s_aggregate": window.aggregate_tok_s,
        "dispatch_ms_per_tick": dispatch_ms,
        "weight_bytes": weights, "kv_bytes": kv, "bytes_per_step": step_bytes,
        "bytes_per_s": step_bytes / (ms / 1e3), "frac_ceiling": step_bytes / (ms / 1e3) / ceiling,
        "roofline_ms": 1e3 * step_bytes / ceiling,
        "device_ms_per_step": device_ms, "device_samples_ms": [1e3 * s for s in replay.samples_s],
        "device_frac_ceiling": step_bytes / replay.median_s / ceiling,
        "idle_share": 1.0 - device_ms / ms,
        "ref_gather_bytes": roofline.ref_attention_gather_bytes(
            cfg, dtype, concurrency, be.max_model_len, args.page_size),
        "engine_max_model_len": be.max_model_len, "wall_s": wall,
    }
    log(f"decode ctx={context} C={concurrency}: {ms:.2f} ms/step engine, {device_ms:.2f} ms device, "
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
        stem = report.result_stem(args.out, result["date"], preset, report.platform_slug(base["machine"]["device_kind"]))
        plans = plan_engines(
            args.contexts, args.concurrency, args.prefill, decode_tokens=args.decode_tokens,
            chunk=args.prefill_chunk, page_size=args.page_size,
            replay_steps=2 + args.replay_calls * args.replay_repeats, split=args.split_engines,
        )
        for i, plan in enumerate(plans):
            log(f"{preset}: engine {i + 1}/{len(plans)}: max_model_len {plan.max_model_len}, "
                f"{plan.num_pages} pages, decode buckets {plan.decode_buckets}")
            if args.decode_buckets:
                plan = dataclasses.replace(plan, decode_buckets=tuple(args.decode_buckets),
                                           max_concurrency=max(plan.max_concurrency, *args.decode_buckets))
            config = engine_config(plan, dtype=args.dtype, page_size=args.page_size,
                                   chunk=args.prefill_chunk, seed=args.seed)
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
                    result["decode"].append(decode_row(be, cfg, dtype, args, ceiling, context, concurrency, rng, log))
                    report.write_result(result, stem)
                for prompt_tokens in plan.prefill_cases:
                    result["prefill"].append(prefill_row(be, cfg, args, matmul, prompt_tokens, rng, log))
                    report.write_result(result, stem)
            except Exception as e:  # keep what was measured; the other presets still run
                log(f"{preset}: engine {i + 1} FAILED: {e!r}; skipping its remaining cases")
                result["errors"].append(f"engine {i + 1}: {e!r}")
                report.write_result(result, stem)
            finally:
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
