"""JAX's persistent compilation cache, on by default, and a way to tell hits from cold compiles.

A warm restart must not recompile: `python -m dgjax.warmup` fills the cache, the server then loads
every bucket from it. The hit/miss counters come from JAX's own monitoring events, so the log line
"loaded from cache" is what JAX did, not what we hope it did.
"""

from __future__ import annotations

import logging
import os
import threading

import jax
from jax import monitoring

log = logging.getLogger("dgjax.compile")

_HIT = "/jax/compilation_cache/cache_hits"
_MISS = "/jax/compilation_cache/cache_misses"
_counts = {"hits": 0, "misses": 0}
_lock = threading.Lock()
_installed = False


def default_cache_dir() -> str:
    return os.environ.get("DGJAX_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "dgjax", "xla"
    )


def _listener(event: str, **_kwargs) -> None:
    if event in (_HIT, _MISS):
        with _lock:
            _counts["hits" if event == _HIT else "misses"] += 1


def enable(cache_dir: str | None) -> str:
    """Point JAX's persistent cache at `cache_dir` (default: ~/.cache/dgjax/xla) and cache everything."""
    global _installed
    path = cache_dir or default_cache_dir()
    os.makedirs(path, exist_ok=True)
    if jax.config.jax_compilation_cache_dir != path:
        jax.config.update("jax_compilation_cache_dir", path)
        _reset_jax_cache_state()
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    if not _installed:
        monitoring.register_event_listener(_listener)
        _installed = True
    return path


def _reset_jax_cache_state() -> None:
    """JAX decides once per process whether the cache is in use; make it look again at the new path."""
    try:
        from jax._src import compilation_cache

        compilation_cache.reset_cache()
    except (ImportError, AttributeError):  # pragma: no cover - layout of a future JAX
        log.warning("could not reset JAX's compilation-cache state; set the cache dir before compiling")


def counts() -> tuple[int, int]:
    """(cache hits, cache misses) recorded so far in this process."""
    with _lock:
        return _counts["hits"], _counts["misses"]
