"""The optimized HLO of a preset's decode executable, and what each of one layer's kernels computes.

Why: the per-kernel device table (decode_bench) names kernels by XLA's fusion kind (`fusion`,
`input_reduce_fusion`, `loop_add_fusion` ...), about 14 launches per layer, and 25-30% of a qwen3-30b-a3b
fp8 tick goes to these small fusions. This writes the compiled module (`<out>/decode.hlo.txt`) and prints
for layer 0 each fusion / custom call in execution order with the named scopes of the ops inside it, so
one can see which model steps each launch covers and which could fold into a neighbour.

    python3 -m benchmarks.dump_decode_hlo --preset qwen3-30b-a3b --quantize fp8 --out $OUT [--tiny]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import tempfile

from benchmarks.engine_runs import BenchEngine
from benchmarks.host_overhead import tiny_preset_dir
from benchmarks.presets import write_model_dir
from dgjax.config import EngineConfig

_CALL = re.compile(r"^\s*(?:ROOT )?%(\S+) = .*? (fusion|custom-call)\((.*)$")
_CALLS = re.compile(r"calls=%([\w.\-]+)")
_SCOPE = re.compile(r'op_name="([^"]+)"')
_KIND = re.compile(r"kind=(k\w+)")
_TARGET = re.compile(r'custom_call_target="([^"]+)"')
_NAME = re.compile(r'"name":"([^"]+)"|name=\\?"([^"\\]+)')


def computations(hlo: str) -> dict[str, str]:
    """Computation name -> its text."""
    out, name, lines = {}, None, []
    for line in hlo.splitlines():
        m = re.match(r"^(?:ENTRY )?%([\w.\-]+) .*\{$", line)
        if m:
            name, lines = m.group(1), []
        elif line.startswith("}") and name:
            out[name] = "\n".join(lines)
            name = None
        elif name:
            lines.append(line)
    return out


def _entry(hlo: str) -> str:
    return next(v for k, v in computations(hlo).items() if k.startswith("main"))


def _kind(line: str, call) -> str:
    """A launch's label: the fusion kind, else the custom call's target, else the op."""
    found = _KIND.search(line) or _TARGET.search(line)
    return found.group(1) if found else call.group(2)


def entry_launches(hlo: str) -> collections.Counter:
    """Kernels the entry computation launches, by kind (fusions and custom calls; each is one launch)."""
    return collections.Counter(_kind(line, m) for line in _entry(hlo).splitlines() if (m := _CALL.match(line)))


def layer_launches(hlo: str, layer: int) -> list[tuple[str, str, list[str]]]:
    """(instruction, kind, scopes inside) of each fusion / custom call of the entry that touches `layer`."""
    comps = computations(hlo)
    entry = _entry(hlo)
    tag = f"layer_{layer}/"
    rows = []
    for line in entry.splitlines():
        m = _CALL.match(line)
        if not m:
            continue
        body = line
        called = _CALLS.search(line)
        if called and called.group(1) in comps:
            body += "\n" + comps[called.group(1)]
        scopes = sorted({s.split(tag, 1)[1].split("/")[0] + "/" + "/".join(s.split(tag, 1)[1].split("/")[1:3])
                         for s in _SCOPE.findall(body) if tag in s})
        if not scopes:
            continue
        rows.append((m.group(1), _kind(line, m), scopes))
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="qwen3-30b-a3b")
    p.add_argument("--quantize", default=None)
    p.add_argument("--width", type=int, default=1)
    p.add_argument("--layer", type=int, default=1)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out", default=".")
    a = p.parse_args()
    model_dir = tiny_preset_dir(a.preset) if a.tiny else write_model_dir(a.preset, tempfile.mkdtemp(prefix="dgjax-hlo-"))
    cfg = EngineConfig(dtype="bfloat16", load_format="dummy", max_model_len=2064, max_concurrency=max(2, a.width),
                       decode_buckets=(a.width,), prefill_buckets=(64,), enable_prefix_cache=False,
                       aot_logprob_variants=False, aot_structured_variants=False, quantize=a.quantize)
    be = BenchEngine(model_dir, cfg, lambda s: None)
    try:
        ex = be.recorder.executor
        exe = next(iter(ex._decode.values()))
        hlo = getattr(exe, "compiled", exe).as_text()
    finally:
        be.close()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "decode.hlo.txt"), "w") as f:
        f.write(hlo)
    rows = layer_launches(hlo, a.layer)
    kinds = collections.Counter(k for _, k, _ in rows)
    print(f"{a.preset} {a.quantize or 'bf16'} width {a.width}: layer {a.layer} has {len(rows)} launches {dict(kinds)}")
    for name, kind, scopes in rows:
        print(f"  {name:40s} {kind:28s} {', '.join(scopes)[:200]}")


if __name__ == "__main__":
    main()
