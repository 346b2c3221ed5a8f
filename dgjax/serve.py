"""`python -m dgjax.serve`: an OpenAI-compatible HTTP server over one engine.

Loads and compiles before binding the port, so a client that sees the port open gets answers
without cold-compile stalls. SIGINT/SIGTERM: new requests get 503, running ones may finish for
--shutdown-timeout seconds, then everything left is aborted and the engine stops.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import uvicorn

from dgjax.engine_args import add_engine_args, engine_config_from_args, parse_size
from dgjax.paths import default_model_dir
from dgjax.serving.options import add_serving_args, serving_options_from_args

logger = logging.getLogger("dgjax.serve")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dgjax.serve", description=__doc__.splitlines()[0])
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
    add_serving_args(p)
    add_engine_args(p)
    return p


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
    try:
        model_dir = args.model or default_model_dir()
    except FileNotFoundError as e:
        logger.error("%s", e)
        return 2
    if not os.path.isfile(os.path.join(model_dir, "config.json")):
        logger.error("no model at %s (expected an HF folder with config.json)", model_dir)
        return 2
    served_name = args.served_model_name or os.path.basename(os.path.normpath(model_dir))
    config = engine_config_from_args(args)
    options = serving_options_from_args(args)

    from dgjax.runtime.engine import Engine
    from dgjax.serving.app import DgjaxServer

    engine = Engine(model_dir, config)
    engine.start()
    dgjax_server = DgjaxServer(engine, served_model_name=served_name, model_dir=model_dir,
                               api_key=args.api_key, max_body_bytes=args.max_body_bytes,
                               options=options)
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
