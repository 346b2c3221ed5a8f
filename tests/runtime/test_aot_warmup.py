"""`python -m dgjax.warmup` fills the persistent cache; a second process then compiles nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from engine_harness import MODEL_DIR

FLAGS = [
    "--model", MODEL_DIR, "--dtype", "float32", "--max-model-len", "128", "--max-concurrency", "2",
    "--decode-buckets", "1,2", "--prefill-buckets", "16,32", "--page-size", "8",
]

SERVE_ONE = r"""
import json, logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from dgjax.engine_args import add_engine_args, engine_config_from_args, model_dir_from_args
import argparse
p = argparse.ArgumentParser(); add_engine_args(p); a = p.parse_args(sys.argv[1:])
from dgjax.llm import LLM
from dgjax.runtime import compile_cache
from dgjax.runtime.types import SamplingParams
llm = LLM(model_dir_from_args(a), engine_config_from_args(a))
before = compile_cache.counts()
out = llm.generate("The with statement", SamplingParams(max_tokens=8, temperature=0.0, logprobs=2))[0]
after = compile_cache.counts()
llm.close()
print(json.dumps({"summary": llm.engine.compile_summary, "before": before, "after": after,
                  "tokens": out.token_ids}))
"""


def _run(args, cache_dir):
    env = dict(os.environ, DGJAX_CACHE_DIR=cache_dir, JAX_PLATFORMS="cpu")
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)


def test_second_process_serves_without_compiling(tmp_path):
    cache = str(tmp_path / "xla")
    warm = _run([sys.executable, "-m", "dgjax.warmup", *FLAGS], cache)
    assert warm.returncode == 0, warm.stderr[-3000:]
    assert "compiled" in warm.stdout and "executables" in warm.stdout
    assert any(os.scandir(cache)), "warmup wrote nothing to the cache"

    served = _run([sys.executable, "-c", SERVE_ONE, *FLAGS], cache)
    assert served.returncode == 0, served.stderr[-3000:]
    result = json.loads(served.stdout.strip().splitlines()[-1])
    summary = result["summary"]
    assert summary["cache_misses"] == 0, served.stderr[-3000:]
    assert summary["cache_hits"] == summary["executables"]
    assert result["before"] == result["after"], "serving the first request compiled something"
    assert len(result["tokens"]) == 8
    assert "0 compiled" in served.stderr  # the engine's own log line says so
