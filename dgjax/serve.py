"""`python -m dgjax.serve`: an OpenAI-compatible HTTP server over one engine.

Loads and compiles before binding the port, so a client that sees the port open gets answers
without cold-compile stalls. SIGINT/SIGTERM: new requests get 503, running ones may finish for
--shutdown-timeout seconds, then everything left is aborted and the engine stops.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import sys

import uvicorn

from dgjax.config import EngineConfig

logger = logging.getLogger("dgjax.serve")

DEFAULT_MODEL_SUBDIR = os.path.join("checkpoints", "tiny-chat")


def default_model_dir() -> str:
    """checkpoints/tiny-chat next to the directory that holds the dgjax package (the repo root)."""
    import dgjax

    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(dgjax.__file__)))
    return os.path.join(package_parent, DEFAULT_MODEL_SUBDIR)


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
        return tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers: {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dgjax.serve", description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="HF model folder (default: checkpoints/tiny-chat)")
    p.add_argument("--served-model-name", default=None,
                   help="name clients put in 'model' (default: the folder's name)")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", default=os.environ.get("DGJAX_API_KEY"),
                   help="require 'Authorization: Bearer KEY' on /v1/* (env DGJAX_API_KEY)")
    p.add_argument("--max-body-bytes", type=parse_size, default="16MiB",
                   help="larger request bodies get 413")
    p.add_argument("--shutdown-timeout", type=float, default=30.0,
                   help="seconds running requests may finish after SIGTERM before being aborted")
    p.add_argument("--log-level", default="info",
                   choices=["critical", "error", "warning", "info", "debug"])
    e = p.add_argument_group("engine")
    e.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"])
    e.add_argument("--max-model-len", type=int, default=None)
    e.add_argument("--max-concurrency", "--max-num-seqs", type=int, default=16,
                   help="requests decoded at once (decode slots)")
    e.add_argument("--max-queue", type=int, default=256,
                   help="waiting requests beyond which new ones get 503")
    e.add_argument("--page-size", type=int, default=16, help="tokens per KV-cache page")
    e.add_argument("--num-pages", type=int, default=None, help="KV-cache pages (overrides --kv-memory)")
    e.add_argument("--kv-memory", type=parse_size, default=None,
                   help="bytes for the KV cache, e.g. 8GiB (default: per platform)")
    e.add_argument("--decode-buckets", type=_int_tuple, default=None, help="e.g. 1,2,4,8,16")
    e.add_argument("--prefill-buckets", type=_int_tuple, default=None, help="e.g. 16,64,256,1024")
    e.add_argument("--no-prefix-cache", "--no-enable-prefix-caching", dest="prefix_cache",
                   action="store_false", help="disable prefix caching")
    e.add_argument("--tensor-parallel", "--tensor-parallel-size", "-tp", type=int, default=1)
    e.add_argument("--compilation-cache-dir", default=None)
    e.add_argument("--seed", type=int, default=0, help="engine seed for requests without one")
    return p


def engine_config_from_args(args: argparse.Namespace) -> EngineConfig:
    fields = {f.name for f in dataclasses.fields(EngineConfig)}
    values = dict(dtype=args.dtype, max_model_len=args.max_model_len,
                  max_concurrency=args.max_concurrency, max_queue=args.max_queue,
                  page_size=args.page_size, num_pages=args.num_pages,
                  kv_memory_bytes=args.kv_memory, enable_prefix_cache=args.prefix_cache,
                  tensor_parallel=args.tensor_parallel,
                  compilation_cache_dir=args.compilation_cache_dir, seed=args.seed)
    if args.decode_buckets:
        values["decode_buckets"] = args.decode_buckets
    if args.prefill_buckets:
        values["prefill_buckets"] = args.prefill_buckets
    return EngineConfig(**{k: v for k, v in values.items() if k in fields})


class _Server(uvicorn.Server):
    """Marks the app as shutting down as soon as a signal arrives (503s), then exits as usual."""

    def __init__(self, config: uvicorn.Config, dgjax_server) -> None:
        super().__init__(config)
        self.dgjax_server = dgjax_server

    def handle_exit(self, sig, frame) -> None:
        self.dgjax_server.begin_shutdown()
        super().handle_exit(sig, frame)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    model_dir = args.model or default_model_dir()
    if not os.path.isfile(os.path.join(model_dir, "config.json")):
        logger.error("no model at %s (expected an HF folder with config.json)", model_dir)
        return 2
    served_name = args.served_model_name or os.path.basename(os.path.normpath(model_dir))
    config = engine_config_from_args(args)

    from dgjax.runtime.engine import Engine
    from dgjax.serving.app import DgjaxServer

    engine = Engine(model_dir, config)
    engine.start()
    dgjax_server = DgjaxServer(engine, served_model_name=served_name, model_dir=model_dir,
                               api_key=args.api_key, max_body_bytes=args.max_body_bytes)
    app = dgjax_server.build()
    logger.info("serving model '%s' from %s (max_model_len=%d, decode buckets %s, prefill "
                "buckets %s, tensor_parallel=%d) at http://%s:%d%s", served_name, model_dir,
                engine.max_model_len, list(config.used_decode_buckets()),
                list(config.prefill_buckets), config.tensor_parallel, args.host, args.port,
                " (API key required)" if args.api_key else "")
    uv_config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                               timeout_graceful_shutdown=args.shutdown_timeout)
    try:
        _Server(uv_config, dgjax_server).run()
    finally:
        dgjax_server.shutdown_engine()
    return 0


if __name__ == "__main__":
    sys.exit(main())
