"""Command-line flags for the engine, shared by `dgjax.serve` and `dgjax.warmup`.

Warmup must compile exactly what serve will run, so both build their EngineConfig here. Flag aliases
follow vLLM's names where users already know them (--max-num-seqs, --tensor-parallel-size).
"""

from __future__ import annotations

import argparse
import re

from dgjax.config import EngineConfig

_SIZE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
               "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def parse_size(text: str) -> int:
    """Bytes from '123', '4G', '4GB', '4GiB', '512mib' (decimal and binary suffixes)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]i?)?b?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2) or ""])


def _int_tuple(text: str) -> tuple[int, ...]:
    try:
        values = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers: {text!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers: {text!r}")
    return values


def add_engine_args(p: argparse.ArgumentParser) -> None:
    d = EngineConfig()  # engine defaults live in one place
    e = p.add_argument_group("engine")
    e.add_argument("--model", default=None, help="HF model folder (default: checkpoints/tiny-chat)")
    e.add_argument("--dtype", default=d.dtype, choices=["auto", "bfloat16", "float32"])
    e.add_argument("--kv-cache-dtype", default=d.kv_cache_dtype,
                   choices=["auto", "bfloat16", "float32", "fp8_e4m3", "fp8"],
                   help="KV cache pages: auto (= --dtype) or fp8_e4m3 (alias fp8: e4m3 with per-token-head scales)")
    e.add_argument("--load-format", default=d.load_format, choices=["safetensors", "dummy"],
                   help="dummy: random weights created on the device (benchmarks)")
    e.add_argument("--quantize", default=d.quantize,
                   choices=["none", "fp8", "nvfp4", "nvfp4-experts", "fp8+nvfp4-experts", "bf12"],
                   help="convert bf16 linear weights at load: fp8 (128x128 blocks), nvfp4, or nvfp4 for MoE "
                        "experts only (from bf16 or FP8 checkpoints; lm_head, embeddings and routers stay); "
                        "bf12: lossless 12-bit re-encoding of the bf16 projections, experts and lm_head (one device)")
    e.add_argument("--max-model-len", type=int, default=None)
    e.add_argument("--max-concurrency", "--max-num-seqs", type=int, default=d.max_concurrency,
                   help="requests decoded at once (decode slots)")
    e.add_argument("--max-queue", type=int, default=d.max_queue,
                   help="waiting requests beyond which new ones get 503")
    e.add_argument("--page-size", type=int, default=d.page_size, help="tokens per KV-cache page")
    e.add_argument("--num-pages", type=int, default=None, help="KV-cache pages (overrides --kv-memory)")
    e.add_argument("--kv-memory", type=parse_size, default=None,
                   help="bytes for the KV cache, e.g. 8GiB (default: what the device has left)")
    e.add_argument("--decode-buckets", type=_int_tuple, default=d.decode_buckets, help="e.g. 1,2,4,8,16")
    e.add_argument("--prefill-buckets", type=_int_tuple, default=d.prefill_buckets,
                   help="e.g. 16,64,256,1024")
    e.add_argument("--no-prefix-cache", "--no-enable-prefix-caching", dest="prefix_cache",
                   action="store_false", help="disable prefix caching")
    e.add_argument("--tensor-parallel", "--tensor-parallel-size", "-tp", type=int,
                   default=d.tensor_parallel)
    e.add_argument("--lazy-structured-compile", dest="aot_structured", action="store_false",
                   help="compile the constrained-decoding tick on the first grammar request, not at startup")
    e.add_argument("--enable-expert-parallel", "--expert-parallel", dest="expert_parallel", action="store_true",
                   help="MoE: place whole routed experts on each tensor-parallel device")
    e.add_argument("--compilation-cache-dir", default=None,
                   help="JAX persistent compilation cache (default: $DGJAX_CACHE_DIR or ~/.cache/dgjax/xla)")
    e.add_argument("--seed", type=int, default=d.seed, help="engine seed for requests without one")


def engine_config_from_args(a: argparse.Namespace) -> EngineConfig:
    return EngineConfig(
        dtype=a.dtype,
        kv_cache_dtype=a.kv_cache_dtype,
        load_format=a.load_format,
        quantize=a.quantize,
        max_model_len=a.max_model_len,
        max_concurrency=a.max_concurrency,
        max_queue=a.max_queue,
        page_size=a.page_size,
        num_pages=a.num_pages,
        kv_memory_bytes=a.kv_memory,
        decode_buckets=a.decode_buckets,
        prefill_buckets=a.prefill_buckets,
        enable_prefix_cache=a.prefix_cache,
        aot_structured_variants=a.aot_structured,
        compilation_cache_dir=a.compilation_cache_dir,
        tensor_parallel=a.tensor_parallel,
        expert_parallel=a.expert_parallel,
        seed=a.seed,
    )


def model_dir_from_args(a: argparse.Namespace) -> str:
    from dgjax.paths import default_model_dir

    return a.model or default_model_dir()
