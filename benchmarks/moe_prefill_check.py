"""The MoE prefill grouped-GEMM kernel on the GPU: routed experts of prefill chunks against lax.ragged_dot and ref.py.

One run measures the HBM read ceiling and the bf16 matmul rate, then for each preset's expert shapes,
weight format (bf16, fp8 128x128 blocks) and chunk size (tokens routed uniformly at random to top_k
experts): checks the kernel against ref.py (max abs error) and times
- kernel: `dgjax.pallas.moe_prefill.moe_prefill` with the kernel (sort, two grouped GEMMs, unsort),
- grouped: the two grouped GEMMs alone on pre-sorted rows (what the sort / unsort cost shows as the gap),
- ragged: `dgjax.models.moe.moe_experts(impl="ragged")`, today's lax.ragged_dot path (quantized weights
  dequantized whole),
- ref.py: the kernel's reference (ragged_dot, float32 between gate/up and the activation).
One timed call runs `layers` MoE layers over distinct expert weights (so weights come from HBM, and the
host dispatch is shared), as many async calls followed by one sync, median of repeats. TFLOP/s counts the
routed experts' matmuls, 2 * tokens * top_k * 3 * embed * ffw per layer. A config that fails to compile
or run is reported, not fatal.

    python3 -m benchmarks.moe_prefill_check                    # qwen3-30b-a3b + glm-4.5-air, bf16 + fp8, 2048/8192
    python3 -m benchmarks.moe_prefill_check --preset qwen3-30b-a3b --formats bf16 --tokens 2048 --sweep
    python -m benchmarks.moe_prefill_check --smoke             # CPU: tiny shapes, kernel interpreted
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.ceilings import measure_matmul_ceiling, measure_read_ceiling
from benchmarks.moe_experts_bench import SMOKE, _experts, _routing
from benchmarks.moe_kernel_check import _err, _quantized, _time
from benchmarks.presets import PRESETS
from benchmarks.stage_sweep import parse_check_args, sweep_two_stages
from dgjax.config import ModelConfig
from dgjax.models import moe
from dgjax.pallas.moe_prefill import api, kernel, ref

FORMATS = ("bf16", "fp8", "nvfp4", "bf12")
PATHS = ("kernel", "grouped", "ragged", "ref.py")


@dataclasses.dataclass
class Row:
    preset: str
    fmt: str
    tokens: int
    gflop: float  # routed-expert matmul GFLOP per layer
    ms: dict  # path -> ms per layer (None: failed)
    err: float
    rel: float
    config: str


@functools.partial(jax.jit, static_argnames=("act", "config", "interpret"))
def _kernel_layers(x, ids, weights, experts, act, config, interpret):
    k = ids.shape[1]
    order, sizes = ref.sort_by_expert(ids, experts[0].gate.shape[0])
    rows = jnp.take(x, order // k, axis=0)
    return [ref.combine(kernel.grouped_mlp(rows, sizes, p.gate, p.up, p.down, hidden_act=act, config=config,
                                           interpret=interpret), order, weights, x.dtype) for p in experts]


@functools.partial(jax.jit, static_argnames=("act", "config", "interpret"))
def _grouped_layers(rows, sizes, experts, act, config, interpret):
    return [kernel.grouped_mlp(rows, sizes, p.gate, p.up, p.down, hidden_act=act, config=config, interpret=interpret)
            for p in experts]


@functools.partial(jax.jit, static_argnames=("act",))
def _ragged_layers(x, ids, weights, experts, act):
    return [moe.moe_experts(x, ids, weights, p, act, impl="ragged") for p in experts]


@functools.partial(jax.jit, static_argnames=("act",))
def _ref_layers(x, ids, weights, experts, act):
    return [ref.moe_prefill(x, ids, weights, p.gate, p.up, p.down, act) for p in experts]


def _fmt_launch(s: kernel.Launch) -> str:
    return f"bm{s.block_m}/bn{s.block_n}/bk{s.block_k}/w{s.num_warps}/st{s.num_stages}"


def _fmt_config(cfg: kernel.Config) -> str:
    return f"gate_up {_fmt_launch(cfg.gate_up)}, down {_fmt_launch(cfg.down)}"


def sweep_configs(smoke: bool, base: kernel.Config) -> list[kernel.Config]:
    """Each stage's launch varied with the other at its default (`base`: kernel.default_config for the format);
    duplicates dropped (grouped_stage shrinks blocks that do not fit the weight)."""
    launches = [(64, 64, 64, 4, 3), (64, 128, 64, 4, 3), (128, 64, 64, 4, 3), (128, 128, 64, 8, 3),
                (128, 128, 32, 8, 4), (64, 128, 32, 4, 4), (64, 64, 128, 4, 2), (128, 256, 64, 8, 3),
                (64, 256, 64, 8, 3), (128, 64, 64, 8, 4), (64, 64, 64, 4, 4), (64, 128, 64, 8, 3)]
    if smoke:
        launches = [(16, 16, 16, 4, 2)]
    out = []
    for stage in ("gate_up", "down"):
        for bm, bn, bk, w, st in launches:
            out.append(dataclasses.replace(base, **{stage: kernel.Launch(bm, bn, bk, w, st)}))
    return [c for c in dict.fromkeys(out) if c != base]


def run_sweep(time_grouped, base_ms: float, want, layers: int, smoke: bool,
              base: kernel.Config) -> tuple[float, kernel.Config]:
    """Sweep the grouped GEMMs' launches (benchmarks/stage_sweep.py); ms per layer."""
    print(f"  sweep (grouped GEMMs; default {base_ms:.3f} ms):", flush=True)
    return sweep_two_stages(time_grouped, sweep_configs(smoke, base), base, base_ms,
                            lambda out: _err(out, want)[0], _fmt_config, layers, 1e3, "ms")


def run_preset(preset: str, cfg: ModelConfig, formats, tokens_list, layers: int, calls: int, repeats: int,
               sweep_tokens: set[int], smoke: bool, rows: list[Row]) -> None:
    act, k = cfg.hidden_act, cfg.num_experts_per_tok
    interpret = jax.default_backend() != "gpu"
    bf16 = _experts(cfg, layers, jnp.bfloat16, 0)
    for fmt in formats:
        experts = bf16 if fmt == "bf16" else _quantized(bf16, fmt)
        base = kernel.default_config(experts[0].gate)
        print(f"\n{preset} {fmt}: {cfg.num_experts} experts x {cfg.hidden_size}x{cfg.moe_intermediate_size}, "
              f"top-{k}, {layers} layers per call", flush=True)
        rng = np.random.default_rng(0)
        for tokens in tokens_list:
            x = jnp.asarray(rng.normal(size=(tokens, cfg.hidden_size)), jnp.bfloat16)
            ids, weights = _routing(cfg, tokens, rng)
            order, sizes = ref.sort_by_expert(ids, cfg.num_experts)
            sorted_rows = jnp.take(x, order // k, axis=0)
            gflop = 2 * tokens * k * 3 * cfg.hidden_size * cfg.moe_intermediate_size / 1e9
            grouped = lambda c=None: _grouped_layers(sorted_rows, sizes, experts, act, c, interpret)  # noqa: E731
            paths = {"kernel": lambda: _kernel_layers(x, ids, weights, experts, act, None, interpret),
                     "grouped": grouped,
                     "ragged": lambda: _ragged_layers(x, ids, weights, experts, act),
                     "ref.py": lambda: _ref_layers(x, ids, weights, experts, act)}
            ms, outs = {}, {}
            for name, fn in paths.items():
                sec, out = _time(fn, calls, repeats)
                ms[name] = None if sec is None else 1e3 * sec / layers
                outs[name] = out
                if sec is None:
                    print(f"  T={tokens} {name}: failed ({out})", flush=True)
            ok = ms["kernel"] is not None and ms["ref.py"] is not None
            err, rel = _err(outs["kernel"], outs["ref.py"]) if ok else (float("nan"), float("nan"))
            row = Row(preset, fmt, tokens, gflop, ms, err, rel, _fmt_config(base))
            rows.append(row)
            shown = ", ".join(f"{n} {v:.3f}" for n, v in ms.items() if v is not None)
            print(f"  T={tokens}: {gflop:.1f} GFLOP/layer; ms/layer: {shown}; err {err:.2e} (rel {rel:.1e})",
                  flush=True)
            if tokens in sweep_tokens and ms["grouped"] is not None:
                want = outs["grouped"]
                run_sweep(lambda c: _time(lambda: grouped(c), calls, repeats), ms["grouped"], want, layers, smoke,
                          base)
    del bf16


def print_table(rows: list[Row], read_bps: float, flops: float) -> None:
    tf = flops / 1e12
    print(f"\n(read ceiling {read_bps / 1e12:.2f} TB/s, matmul ceiling {tf:.0f} TFLOP/s)")
    print("| preset | format | tokens | GFLOP/layer | kernel ms | TFLOP/s | % of matmul | grouped ms "
          "| ragged ms | ragged TFLOP/s | ref.py ms | speedup vs ragged | max abs err | rel err |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        cell = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        rate = lambda v: None if not v else r.gflop / v  # GFLOP per ms = TFLOP/s  # noqa: E731
        ker, rag = r.ms.get("kernel"), r.ms.get("ragged")
        kt, rt = rate(ker), rate(rag)
        print(f"| {r.preset} | {r.fmt} | {r.tokens} | {r.gflop:.1f} | {cell(ker)} "
              f"| {'-' if kt is None else f'{kt:.0f}'} "
              f"| {'-' if kt is None else f'{100 * kt / tf:.0f}%'} | {cell(r.ms.get('grouped'))} | {cell(rag)} "
              f"| {'-' if rt is None else f'{rt:.0f}'} | {cell(r.ms.get('ref.py'))} "
              f"| {'-' if not (ker and rag) else f'{rag / ker:.1f}x'} | {r.err:.2e} | {r.rel:.1e} |")


def main(argv=None) -> list[Row]:
    parsed = parse_check_args(argv, prog="python -m benchmarks.moe_prefill_check", doc=__doc__, formats=FORMATS, tokens="2048,8192",
                              layers=3, calls=5, repeats=3, sweep_tokens="2048",
                              smoke_defaults=dict(tokens="24", layers=2, calls=1, repeats=1, sweep_tokens="24"))
    args, formats, tokens, sweep_tokens = parsed.ns, parsed.formats, parsed.tokens, parsed.sweep_tokens
    t0 = time.perf_counter()
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}; "
          f"{api.ENV_VAR} is not read here (paths are called directly)")
    read = measure_read_ceiling(1 << 22 if args.smoke else 8 << 30, calls=2 if args.smoke else 10,
                                repeats=2 if args.smoke else 5).bytes_per_s
    flops = measure_matmul_ceiling(128 if args.smoke else 8192, calls=2 if args.smoke else 10,
                                   repeats=2 if args.smoke else 5).flops_per_s
    print(f"read ceiling {read / 1e12:.2f} TB/s, matmul ceiling {flops / 1e12:.1f} TFLOP/s")
    rows: list[Row] = []
    presets = {"smoke": SMOKE} if args.smoke else {p: PRESETS[p] for p in args.preset or ["qwen3-30b-a3b",
                                                                                         "glm-4.5-air"]}
    for name, hf in presets.items():
        try:
            run_preset(name, ModelConfig.from_hf_dict(hf), formats, tokens, args.layers, args.calls, args.repeats,
                       sweep_tokens, args.smoke, rows)
        except Exception as err:  # noqa: BLE001 - e.g. out of memory for one preset; keep the others
            print(f"{name}: failed ({type(err).__name__}: {str(err)[:200]})", flush=True)
    print_table(rows, read, flops)
    print(f"\nms per MoE layer (routed experts only; one call = {args.layers} layers over distinct weights); "
          f"total {time.perf_counter() - t0:.0f} s")
    return rows


if __name__ == "__main__":
    main()
