"""Command-line flags for the engine, shared by `dgjax.serve` and `dgjax.warmup`.

Warmup must compile exactly what serve will run, so both build their EngineConfig here.
"""

from __future__ import annotations

import argparse

from dgjax.config import DEFAULT_DECODE_BUCKETS, DEFAULT_PREFILL_BUCKETS, EngineConfig


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def add_engine_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine")
    g.add_argument("--model", default=None, help="HF model folder (default: the embedded tiny model)")
    g.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"])
    g.add_argument("--load-format", default="safetensors", choices=["safetensors", "dummy"],
                   help="dummy: random weights created on the device (benchmarks)")
    g.add_argument("--max-model-len", type=int, default=None)
    g.add_argument("--max-concurrency", type=int, default=16, help="decode slots")
    g.add_argument("--max-queue", type=int, default=256, help="waiting requests before 503")
    g.add_argument("--page-size", type=int, default=16)
    g.add_argument("--num-pages", type=int, default=None, help="KV pool pages (default: from memory)")
    g.add_argument("--kv-memory-gib", type=float, default=None, help="KV pool budget in GiB")
    g.add_argument("--decode-buckets", type=_int_list, default=DEFAULT_DECODE_BUCKETS)
    g.add_argument("--prefill-buckets", type=_int_list, default=DEFAULT_PREFILL_BUCKETS)
    g.add_argument("--no-prefix-cache", action="store_true")
    g.add_argument("--compilation-cache-dir", default=None,
                   help="JAX persistent compilation cache (default: $DGJAX_CACHE_DIR or ~/.cache/dgjax/xla)")
    g.add_argument("--tensor-parallel", type=int, default=1)
    g.add_argument("--seed", type=int, default=0)


def engine_config_from_args(a: argparse.Namespace) -> EngineConfig:
    return EngineConfig(
        dtype=a.dtype,
        load_format=a.load_format,
        max_model_len=a.max_model_len,
        max_concurrency=a.max_concurrency,
        max_queue=a.max_queue,
        page_size=a.page_size,
        num_pages=a.num_pages,
        kv_memory_bytes=None if a.kv_memory_gib is None else int(a.kv_memory_gib * 2**30),
        decode_buckets=a.decode_buckets,
        prefill_buckets=a.prefill_buckets,
        enable_prefix_cache=not a.no_prefix_cache,
        compilation_cache_dir=a.compilation_cache_dir,
        tensor_parallel=a.tensor_parallel,
        seed=a.seed,
    )


def model_dir_from_args(a: argparse.Namespace) -> str:
    from dgjax.paths import default_model_dir

    return a.model or default_model_dir()
