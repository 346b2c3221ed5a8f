"""The MoE decode kernel on the GPU: routed experts of 1-16 tokens against ragged_dot, gathered experts and ref.py.

One run measures the HBM read ceiling, then for each preset's expert shapes, weight format (bf16 and fp8
128x128 blocks by default; nvfp4, mxfp4 and the lossless bf12 on request) and token count: checks the kernel against ref.py (max
abs error) and times the kernel, `lax.ragged_dot` and gather + einsum (the reference paths of
`dgjax.models.moe.moe_experts`; for quantized weights they dequantize in float32) and ref.py. One timed
call runs `layers` MoE layers over distinct expert weights (so reads come from HBM, not L2, and the host
dispatch of a call is shared), as many async calls followed by one sync, median of repeats. Bandwidth
counts the bytes decode must read: the weights (and scales) of the experts the tokens touch. A config
that fails to compile or run is reported, not fatal.

    python3 -m benchmarks.moe_kernel_check                    # qwen3-30b-a3b + glm-4.5-air, bf16 + fp8, T 1/4/16
    python3 -m benchmarks.moe_kernel_check --preset qwen3-30b-a3b --tokens 1 --sweep   # launch-knob sweep
    python -m benchmarks.moe_kernel_check --smoke             # CPU: tiny shapes, kernel interpreted
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.ceilings import measure_read_ceiling, time_async
from benchmarks.moe_experts_bench import SMOKE, _all_layers, _experts, _routing
from benchmarks.presets import PRESETS
from benchmarks.stage_sweep import parse_check_args, sweep_two_stages
from dgjax.config import ModelConfig
from dgjax.models import moe
from dgjax.pallas.moe_decode import kernel, ref
from dgjax.quant import Fp8BlockWeight, Mxfp4Weight, Nvfp4Weight, bf12, fp8_block, mxfp4, nvfp4

FORMATS = ("bf16", "fp8", "nvfp4", "mxfp4", "bf12")


@dataclasses.dataclass
class Row:
    preset: str
    fmt: str
    tokens: int
    touched: int
    mb: float  # routed bytes per layer
    us: dict  # path -> µs per layer (None: failed)
    err: float
    rel: float
    config: str


_QUANTIZERS = {"fp8": fp8_block.quantize, "nvfp4": nvfp4.quantize, "mxfp4": mxfp4.quantize}


@functools.partial(jax.jit, static_argnames=("fmt",))
def _quantize_rows(w: jax.Array, fmt: str) -> tuple[jax.Array, ...]:
    return _QUANTIZERS[fmt](jnp.swapaxes(w, 1, 2))


def _node(w: jax.Array, fmt: str):
    """Dense [E, in, out] -> a quantized node over its [E, out, in] rows, as a checkpoint stores them (bf12: the
    bf16 weights re-encoded losslessly)."""
    if fmt == "bf12":
        return bf12.node_from(jnp.swapaxes(w.astype(jnp.bfloat16), 1, 2), tuple(w.shape), 1, 1)
    arrays = _quantize_rows(w, fmt)
    geo = dict(shape=tuple(w.shape), in_dims=1, expert_dims=1)
    if fmt == "fp8":
        return Fp8BlockWeight(weight=arrays[0], scale=arrays[1], **geo)
    if fmt == "nvfp4":
        return Nvfp4Weight(packed=arrays[0], block_scale=arrays[1], global_scale=arrays[2], **geo)
    return Mxfp4Weight(packed=arrays[0], scale=arrays[1], **geo)


def _quantized(layers: list[moe.ExpertParams], fmt: str) -> list[moe.ExpertParams]:
    return [moe.ExpertParams(gate=_node(p.gate, fmt), up=_node(p.up, fmt), down=_node(p.down, fmt)) for p in layers]


def _expert_bytes(p: moe.ExpertParams) -> int:
    """Bytes of one expert's gate, up and down (values + scales)."""
    leaves = jax.tree_util.tree_leaves(p)
    return sum(a.nbytes for a in leaves) // p.gate.shape[0]


@functools.partial(jax.jit, static_argnames=("act", "config", "interpret"))
def _kernel_layers(x, ids, weights, experts, act, config, interpret):
    return [kernel.moe_decode(x, ids, weights, p.gate, p.up, p.down, hidden_act=act, config=config,
                              interpret=interpret) for p in experts]


@functools.partial(jax.jit, static_argnames=("act",))
def _ref_layers(x, ids, weights, experts, act):
    return [ref.moe_decode(x, ids, weights, p.gate, p.up, p.down, act) for p in experts]


def _time(fn, calls: int, repeats: int) -> tuple[float | None, object]:
    """(seconds per call, first output), or (None, error text) when it does not compile or run."""
    try:
        out = fn()
        jax.block_until_ready(out)
        return time_async(fn, calls, repeats).median_s, out
    except Exception as err:  # noqa: BLE001 - a failing config is a result to report
        return None, f"{type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"


def _err(got, want) -> tuple[float, float]:
    g = np.asarray(got[0].astype(jnp.float32))
    w = np.asarray(want[0].astype(jnp.float32))
    err = float(np.max(np.abs(g - w))) if np.isfinite(g).all() else float("nan")
    return err, err / max(float(np.max(np.abs(w))), 1e-30)


def _fmt_config(cfg: kernel.Config) -> str:
    f = lambda s: f"bn{s.block_n}/bk{s.block_k}/s{s.splits}/w{s.num_warps}/st{s.num_stages}"  # noqa: E731
    return f"gate_up {f(cfg.gate_up)}, down {f(cfg.down)}"


def sweep_configs(experts: moe.ExpertParams, tokens: int, top_k: int, smoke: bool) -> list[kernel.Config]:
    """Launch knobs around the default: each stage's tile and split choices with the other stage at its
    default, then warps / stages for both at once. Invalid tilings are skipped."""
    base = kernel.default_config(experts.gate, experts.down, tokens, top_k)
    g_op = kernel.describe(experts.gate)
    d_op = kernel.describe(experts.down)
    tiles = [(64, 128, 1), (64, 128, 2), (64, 128, 4), (32, 128, 1), (32, 128, 2), (128, 128, 1),
             (128, 128, 2), (64, 64, 2), (64, 256, 1), (64, 256, 2)]
    launches = ((4, 2), (4, 4), (8, 3))  # (warps, stages); the default is (4, 3)
    if smoke:
        tiles, launches = [(16, 16, 1)], ((4, 2),)
    out = []
    for stage, op in (("gate_up", g_op), ("down", d_op)):
        for bn, bk, splits in tiles:
            launch = dataclasses.replace(getattr(base, stage), block_n=bn, block_k=bk, splits=splits)
            try:
                kernel.check_launch(op, launch)
            except ValueError:
                continue
            out.append(dataclasses.replace(base, **{stage: launch}))
    for warps, stages in launches:
        out.append(kernel.Config(dataclasses.replace(base.gate_up, num_warps=warps, num_stages=stages),
                                 dataclasses.replace(base.down, num_warps=warps, num_stages=stages)))
    return [c for c in dict.fromkeys(out) if c != base]


def run_sweep(time_kernel, experts: moe.ExpertParams, tokens: int, top_k: int, base: kernel.Config,
              base_us: float, want, layers: int, smoke: bool) -> tuple[float, kernel.Config]:
    """Sweep the decode kernel's launches at `tokens` tokens (benchmarks/stage_sweep.py); µs per layer."""
    print(f"  sweep at T={tokens} (default {base_us:.1f} µs):", flush=True)
    return sweep_two_stages(time_kernel, sweep_configs(experts, tokens, top_k, smoke), base, base_us,
                            lambda out: _err(out, want)[0], _fmt_config, layers, 1e6, "µs")


def run_preset(preset: str, cfg: ModelConfig, formats, tokens_list, layers: int, calls: int, repeats: int,
               sweep_tokens: set[int], smoke: bool, rows: list[Row]) -> None:
    act, k = cfg.hidden_act, cfg.num_experts_per_tok
    interpret = jax.default_backend() != "gpu"
    bf16 = _experts(cfg, layers, jnp.bfloat16, 0)
    for fmt in formats:
        experts = bf16 if fmt == "bf16" else _quantized(bf16, fmt)
        per_expert = _expert_bytes(experts[0])
        print(f"\n{preset} {fmt}: {cfg.num_experts} experts x {cfg.hidden_size}x{cfg.moe_intermediate_size}, "
              f"top-{k}, {layers} layers per call, {per_expert / 1e6:.2f} MB per expert", flush=True)
        rng = np.random.default_rng(0)
        for tokens in tokens_list:
            x = jnp.asarray(rng.normal(size=(tokens, cfg.hidden_size)), jnp.bfloat16)
            ids, weights = _routing(cfg, tokens, rng)
            touched = len(np.unique(np.asarray(ids)))
            config = kernel.default_config(experts[0].gate, experts[0].down, tokens, k)
            paths = {"kernel": lambda c=config: _kernel_layers(x, ids, weights, experts, act, c, interpret),
                     "ref.py": lambda: _ref_layers(x, ids, weights, experts, act)}
            for impl in ("ragged", "gather"):
                paths[impl] = lambda i=impl: _all_layers(x, ids, weights, experts, i, act)
            us, outs = {}, {}
            for name, fn in paths.items():
                sec, out = _time(fn, calls, repeats)
                us[name] = None if sec is None else 1e6 * sec / layers
                outs[name] = out
                if sec is None:
                    print(f"  T={tokens} {name}: failed ({out})", flush=True)
            ok = us["kernel"] is not None and us["ref.py"] is not None
            err, rel = _err(outs["kernel"], outs["ref.py"]) if ok else (float("nan"), float("nan"))
            row = Row(preset, fmt, tokens, touched, touched * per_expert / 1e6, us, err, rel, _fmt_config(config))
            rows.append(row)
            shown = ", ".join(f"{n} {v:.1f}" for n, v in us.items() if v is not None)
            print(f"  T={tokens}: {touched} experts, {row.mb:.1f} MB/layer; µs/layer: {shown}; err {err:.2e} "
                  f"(rel {rel:.1e}); {row.config}", flush=True)
            if tokens in sweep_tokens and us["kernel"] is not None and ok:
                time_kernel = lambda c: _time(  # noqa: E731
                    lambda: _kernel_layers(x, ids, weights, experts, act, c, interpret), calls, repeats)
                run_sweep(time_kernel, experts[0], tokens, k, config, us["kernel"], outs["ref.py"], layers, smoke)
    del bf16


def print_table(rows: list[Row], ceiling: float) -> None:
    tbs = ceiling / 1e12
    print(f"\n| preset | format | tokens | experts | MB/layer | kernel µs | TB/s | % of {tbs:.2f} TB/s "
          f"| roofline µs | ragged µs | gather µs | ref.py µs | max abs err | rel err |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        cell = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        ker = r.us.get("kernel")
        bw = r.mb * 1e6 / (ker * 1e-6) / 1e12 if ker else None
        print(f"| {r.preset} | {r.fmt} | {r.tokens} | {r.touched} | {r.mb:.1f} | {cell(ker)} "
              f"| {'-' if bw is None else f'{bw:.2f}'} | {'-' if bw is None else f'{100 * bw / tbs:.0f}%'} "
              f"| {r.mb * 1e6 / ceiling * 1e6:.1f} | {cell(r.us.get('ragged'))} | {cell(r.us.get('gather'))} "
              f"| {cell(r.us.get('ref.py'))} | {r.err:.2e} | {r.rel:.1e} |")


def main(argv=None) -> list[Row]:
    parsed = parse_check_args(argv, prog="python -m benchmarks.moe_kernel_check", doc=__doc__, formats=FORMATS, tokens="1,4,16",
                              layers=4, calls=20, repeats=5, sweep_tokens="1",
                              smoke_defaults=dict(tokens="1,4", layers=2, calls=2, repeats=2))
    args, formats, tokens, sweep_tokens = parsed.ns, parsed.formats, parsed.tokens, parsed.sweep_tokens
    t0 = time.perf_counter()
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}")
    ceiling = measure_read_ceiling(1 << 24 if args.smoke else 8 << 30, calls=2 if args.smoke else 10,
                                   repeats=2 if args.smoke else 5).bytes_per_s
    print(f"read ceiling {ceiling / 1e12:.2f} TB/s")
    rows: list[Row] = []
    presets = {"smoke": SMOKE} if args.smoke else {p: PRESETS[p] for p in args.preset or ["qwen3-30b-a3b",
                                                                                         "glm-4.5-air"]}
    for name, hf in presets.items():
        try:
            run_preset(name, ModelConfig.from_hf_dict(hf), formats, tokens, args.layers, args.calls, args.repeats,
                       sweep_tokens, args.smoke, rows)
        except Exception as err:  # noqa: BLE001 - e.g. out of memory for one preset; keep the others
            print(f"{name}: failed ({type(err).__name__}: {str(err)[:200]})", flush=True)
    print_table(rows, ceiling)
    print(f"\nµs per MoE layer (routed experts only; one call = {args.layers} layers over distinct weights); "
          f"total {time.perf_counter() - t0:.0f} s")
    return rows


if __name__ == "__main__":
    main()
