"""A small engine configuration shared by the runtime tests (float32 so results compare exactly)."""

from __future__ import annotations

import os

from dgjax.config import EngineConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_DIR = os.path.join(REPO, "checkpoints", "tiny-chat")


def small_engine_config(**overrides) -> EngineConfig:
    base = dict(
        dtype="float32", max_model_len=256, max_concurrency=8, page_size=8,
        decode_buckets=(1, 2, 4, 8), prefill_buckets=(16, 64), max_queue=64,
        aot_structured_variants=False,  # CI time: constrained tests compile the split tick on first use
    )
    base.update(overrides)
    return EngineConfig(**base)
