"""`python -m dgjax.warmup --model DIR [engine flags]`: compile every bucket into the persistent cache.

Run it once per model and flag set; `python -m dgjax.serve` with the same flags then starts without
compiling (its log says how many executables came from the cache).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from dgjax.engine_args import add_engine_args, engine_config_from_args, model_dir_from_args


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dgjax.warmup", description=__doc__.splitlines()[0])
    add_engine_args(p)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from dgjax.runtime.engine import Engine

    t0 = time.perf_counter()
    engine = Engine(model_dir_from_args(args), engine_config_from_args(args))
    engine.load(progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    s = engine.compile_summary
    print(
        f"warmup done in {time.perf_counter() - t0:.1f}s: {s['executables']} executables "
        f"({s['cache_hits']} already cached, {s['cache_misses']} compiled) in {engine.cache_dir}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
