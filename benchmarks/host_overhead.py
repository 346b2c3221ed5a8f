"""Host cost of a decode tick: a preset's layer structure at tiny widths, so the device finishes each tick
almost at once and the tick interval is what the host (launches, dispatch, scheduling) costs.

The real presets spend 3-9 ms of device time per tick, which hides (or not) a host that needs as long: the
fp8 qwen3-30b-a3b engine measured 8.5 ms per tick for 3.9 ms of device work. Keeping every layer, projection
and weight format of the preset but shrinking its widths isolates that host part; running it under
different XLA_FLAGS (e.g. command-buffer settings) shows what they change. Prints one line:

    preset quantize leaves kernels/tick? ms/tick exe-call-ms

    XLA_FLAGS=... python3 -m benchmarks.host_overhead --preset qwen3-30b-a3b --quantize fp8
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

from benchmarks.engine_runs import BenchEngine
from benchmarks.presets import PRESETS, write_model_dir
from dgjax.config import EngineConfig

# Widths small enough to make device time negligible, large enough for every kernel's tiling (fp8 blocks
# of 128, 64-column tiles, 16-row dots).
TINY = dict(hidden_size=256, intermediate_size=512, moe_intermediate_size=256, shared_expert_intermediate_size=256,
            num_attention_heads=4, num_key_value_heads=2, head_dim=128, vocab_size=4096)


def tiny_preset_dir(preset: str, real_widths: bool = False) -> str:
    d = write_model_dir(preset, tempfile.mkdtemp(prefix="dgjax-host-"))
    if real_widths:
        return d
    cfg = dict(PRESETS[preset])
    cfg.update({k: v for k, v in TINY.items() if k in cfg or k in ("head_dim",)})
    if "q_lora_rank" in cfg:
        raise SystemExit("MLA presets are not shrunk here")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="qwen3-30b-a3b")
    p.add_argument("--quantize", default=None)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--label", default=os.environ.get("XLA_FLAGS", "") or "default flags")
    p.add_argument("--real-widths", action="store_true",
                   help="keep the preset's widths: the executable call's host time on the real model")
    a = p.parse_args()
    import jax

    cfg = EngineConfig(dtype="bfloat16", load_format="dummy", max_model_len=64 + a.tokens + 16,
                       max_concurrency=max(a.concurrency, 2), decode_buckets=(a.concurrency,), prefill_buckets=(64,),
                       enable_prefix_cache=False, aot_logprob_variants=False, aot_structured_variants=False,
                       quantize=a.quantize)
    be = BenchEngine(tiny_preset_dir(a.preset, a.real_widths), cfg, lambda s: None)
    ex = be.recorder.executor
    leaves = len(jax.tree_util.tree_leaves(ex.call_params))  # what each step call passes
    calls: list[float] = []
    inner = ex.decode

    def timed(*args):
        t = time.perf_counter()
        out = inner(*args)
        calls.append(time.perf_counter() - t)
        return out

    ex.decode = timed
    rng = np.random.default_rng(0)
    try:
        be.decode(rng, 32, a.concurrency, 16, timeout_s=300)  # warm every path
        calls.clear()
        window, _, tick = be.decode(rng, 32, a.concurrency, a.tokens, timeout_s=300)
    finally:
        be.close()
    width = "real widths" if a.real_widths else "tiny widths"
    from dgjax.runtime.flat_call import FlatCall
    exes = list(ex._decode.values())
    flat = f"flat calls {sum(isinstance(e, FlatCall) for e in exes)}/{len(exes)}, fallbacks " \
        f"{sum(getattr(e, 'fallbacks', 0) for e in exes)}"
    print(f"{a.preset:16s} {a.quantize or 'bf16':6s} {width} leaves {leaves:5d}  ms/tick {window.ms_per_step:6.3f}  "
          f"decode call ms {1e3 * float(np.median(calls)):6.3f}  {flat}  [{a.label}]", flush=True)


if __name__ == "__main__":
    main()
