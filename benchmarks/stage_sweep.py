"""What the two MoE kernel checks (moe_kernel_check, moe_prefill_check) share: their command line and the
launch-knob sweep over their two kernels (gate/up, then down).

Each candidate config changes one stage's launch (or both stages' warps/stages); after timing them all,
the best gate_up launch found with the default down launch is combined with the best down launch found
with the default gate_up launch, and that pair is timed too. Configs need `gate_up` and `down` fields
and a constructor taking (gate_up, down).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np


def sweep_two_stages(time_config: Callable[[Any], tuple[float | None, Any]], configs: Iterable[Any], base: Any,
                     base_value: float, error: Callable[[Any], float], fmt: Callable[[Any], str], layers: int,
                     scale: float, unit: str) -> tuple[float, Any]:
    """(best value per layer, its config); `time_config(c)` -> (seconds per call or None, output or error),
    values are seconds / layers * scale (1e6: µs, 1e3: ms)."""
    best = (base_value, base)
    best_stage = {"gate_up": (base_value, base.gate_up), "down": (base_value, base.down)}
    digits = 3 if scale < 1e6 else 1

    def timed(c: Any) -> float | None:
        sec, out = time_config(c)
        if sec is None:
            print(f"    {fmt(c)}: failed ({out})", flush=True)
            return None
        err = error(out)
        value = scale * sec / layers
        print(f"    {fmt(c)}: {value:8.{digits}f} {unit}/layer, err {err:.1e}", flush=True)
        return value if np.isfinite(err) else None

    for c in configs:
        value = timed(c)
        if value is None:
            continue
        best = min(best, (value, c), key=lambda b: b[0])
        for stage, other in (("gate_up", "down"), ("down", "gate_up")):
            if getattr(c, other) == getattr(base, other) and value < best_stage[stage][0]:
                best_stage[stage] = (value, getattr(c, stage))
    combined = type(base)(best_stage["gate_up"][1], best_stage["down"][1])
    if combined not in (base, best[1]):
        value = timed(combined)
        if value is not None:
            best = min(best, (value, combined), key=lambda b: b[0])
    print(f"  best: {fmt(best[1])} {best[0]:.{digits}f} {unit}/layer", flush=True)
    return best


@dataclasses.dataclass
class CheckArgs:
    """The parsed command line of an MoE kernel check."""

    ns: argparse.Namespace
    formats: list[str]
    tokens: list[int]
    sweep_tokens: set[int]


def parse_check_args(argv, *, prog: str, doc: str, formats: tuple[str, ...], tokens: str, layers: int,
                     calls: int, repeats: int, sweep_tokens: str, smoke_defaults: dict) -> CheckArgs:
    """The options both MoE kernel checks take (presets, formats, token counts, timing, sweep, smoke)."""
    from benchmarks.presets import PRESETS

    ap = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    moe_presets = sorted(k for k, v in PRESETS.items() if "moe" in v["model_type"])
    ap.add_argument("--preset", action="append", choices=moe_presets)
    ap.add_argument("--formats", default="bf16,fp8", help=f"comma-separated, of {formats}")
    ap.add_argument("--tokens", default=tokens)
    ap.add_argument("--layers", type=int, default=layers)
    ap.add_argument("--calls", type=int, default=calls)
    ap.add_argument("--repeats", type=int, default=repeats)
    ap.add_argument("--sweep", action="store_true", help="sweep launch knobs at --sweep-tokens")
    ap.add_argument("--sweep-tokens", default=sweep_tokens)
    ap.add_argument("--smoke", action="store_true", help="tiny CPU shapes (kernel interpreted)")
    if ap.parse_known_args(argv)[0].smoke:
        ap.set_defaults(**smoke_defaults)
    ns = ap.parse_args(argv)
    chosen = [f for f in ns.formats.split(",") if f]
    if any(f not in formats for f in chosen):
        raise SystemExit(f"--formats takes some of {formats}, got {ns.formats}")
    return CheckArgs(ns, chosen, [int(t) for t in ns.tokens.split(",")],
                     {int(t) for t in ns.sweep_tokens.split(",")} if ns.sweep else set())
