"""Compile time of each step executable of a preset, with and without parts of the parameter packing.

Why: after session 6 packed the per-layer norm vectors (dgjax/runtime/param_packing.py), qwen3-30b-a3b's
engine took 83-96 s to load and compile on the H200 instead of 45-53 s, almost all of it in the prefill
executable, while glm-4.5-air (no q/k head norms) and llama-3.1-8b did not change. This times the compiles
with the packing as shipped, without the q/k head-norm stacks, and without any packing, each in a fresh
process with an empty compilation cache of its own. Prints one line per variant:

    variant  executable seconds ...  total      (executable*: loaded from the compilation cache)

    python3 -m benchmarks.compile_time --preset qwen3-30b-a3b [--variants packed,no-attn,none] [--tiny]
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
import tempfile

VARIANTS = ("packed", "no-attn", "none")


def run_variant(preset: str, variant: str, quantize: str | None, tiny: bool, chunk: int) -> None:
    from benchmarks.engine_runs import BenchEngine
    from benchmarks.host_overhead import tiny_preset_dir
    from benchmarks.presets import write_model_dir
    from dgjax.config import EngineConfig
    from dgjax.runtime import param_packing

    if variant in ("no-attn", "none"):
        param_packing.ROW_FIELDS = tuple(f for f in param_packing.ROW_FIELDS if not f.startswith("attn."))
    if variant == "none":
        param_packing.ROW_FIELDS = ()
    times: list[tuple[str, float]] = []

    class Grab(logging.Handler):
        def emit(self, record):
            m = re.match(r"(.+): (compiled|loaded from cache) in ([\d.]+)s", record.getMessage())
            if m:  # '*': loaded from the persistent compilation cache, not compiled
                times.append((m.group(1) + ("*" if m.group(2) != "compiled" else ""), float(m.group(3))))

    logging.getLogger("dgjax.executor").addHandler(Grab())
    logging.getLogger("dgjax.executor").setLevel(logging.INFO)
    model_dir = tiny_preset_dir(preset) if tiny else write_model_dir(preset, tempfile.mkdtemp(prefix="dgjax-ct-"))
    cfg = EngineConfig(dtype="bfloat16", load_format="dummy", max_model_len=chunk + 16, max_concurrency=2,
                       decode_buckets=(1,), prefill_buckets=(chunk,), enable_prefix_cache=False,
                       aot_logprob_variants=False, aot_structured_variants=False, quantize=quantize,
                       compilation_cache_dir=tempfile.mkdtemp(prefix="dgjax-ct-cache-"))
    be = BenchEngine(model_dir, cfg, lambda s: None)
    be.close()
    cells = "  ".join(f"{name} {s:6.2f}" for name, s in times)
    print(f"{variant:8s} {cells}  total {sum(s for _, s in times):6.2f}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="qwen3-30b-a3b")
    p.add_argument("--quantize", default=None)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--chunk", type=int, default=2048)
    p.add_argument("--tiny", action="store_true", help="the preset's layers at tiny widths (host_overhead.TINY)")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # the child process's variant
    a = p.parse_args()
    if a.one:
        run_variant(a.preset, a.one, a.quantize, a.tiny, a.chunk)
        return
    for v in a.variants.split(","):
        if v not in VARIANTS:
            raise SystemExit(f"unknown variant {v!r}; known: {VARIANTS}")
        args = [sys.executable, "-m", "benchmarks.compile_time", "--preset", a.preset, "--one", v,
                "--chunk", str(a.chunk)] + (["--quantize", a.quantize] if a.quantize else []) \
            + (["--tiny"] if a.tiny else [])
        proc = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ))
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(v)]
        print(lines[-1] if lines else f"{v:8s} failed: {proc.stderr.strip().splitlines()[-1:]}", flush=True)


if __name__ == "__main__":
    main()
