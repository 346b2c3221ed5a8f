"""The benchmark's outputs: a dated markdown file and a JSON of raw numbers per preset, and the short
summary table printed last."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re

import jax

from benchmarks.device_trace import launch_mode

GB = 1e9


def machine_info() -> dict:
    dev = jax.devices()[0]
    try:
        jaxlib = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        jaxlib = "unknown"
    stats = dev.memory_stats() if hasattr(dev, "memory_stats") else None
    return {
        "device_kind": dev.device_kind,
        "device_memory_bytes": (stats or {}).get("bytes_limit"),
        "platform": dev.platform,
        "num_devices": jax.device_count(),
        "jax": jax.__version__,
        "jaxlib": jaxlib,
        "python": platform.python_version(),
        "host_cpus": os.cpu_count(),
        "environment": switches(),
    }


def switches() -> dict[str, str]:
    """The DGJAX_* and XLA_* variables set for this run: the A/B switches a result file must name, since the
    command line shows only the script's arguments."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(("DGJAX_", "XLA_"))}


def platform_slug(device_kind: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", device_kind.lower()).strip("-") or "unknown"


def result_stem(out_dir: str, date: str, preset: str, slug: str) -> str:
    """`<out>/<date>-<preset>-<slug>`, with -2, -3 ... appended rather than overwrite an earlier run."""
    base = os.path.join(out_dir, f"{date}-{preset}-{slug}")
    stem, n = base, 1
    while os.path.exists(stem + ".md") or os.path.exists(stem + ".json"):
        n += 1
        stem = f"{base}-{n}"
    return stem


def write_lines(out_dir: str | None, name: str, lines: list[str]) -> None:
    """A probe's markdown lines as `out_dir`/`name` (nothing without `out_dir`)."""
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, name), "w") as f:
            f.write("\n".join(lines) + "\n")


def markdown_table(header: list[str], rows: list[list]) -> list[str]:
    """A markdown table's lines: the header, its rule, one line a row (cells already formatted)."""
    return ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"] + [
        "| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def write_result(result: dict, stem: str) -> None:
    os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(render_markdown(result))


def _f(x, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _decode_table(rows: list[dict]) -> list[str]:
    lines = [
        "| context | streams | ms/step | tok/s per stream | tok/s total | mean context | GB/step needed "
        "(weights + KV) | TB/s | of ceiling | roofline ms | device ms/step | device of ceiling | "
        "device-idle share | ref attention gathers GB/step | dispatch ms/tick | host ms/dispatch | "
        "SM MHz before / after | idle share, untraced | launches |",
        "|" + "---|" * 19,
    ]
    for d in rows:
        lines.append(
            f"| {d['context']} | {d['concurrency']} | {_f(d['ms_per_step'])} | {_f(d['tok_s_per_stream'], 1)} | "
            f"{_f(d['tok_s_aggregate'], 1)} | {_f(d['mean_context'], 0)} | "
            f"{d['bytes_per_step'] / GB:.2f} ({d['weight_bytes'] / GB:.2f} + {d['kv_bytes'] / GB:.2f}) | "
            f"{d['bytes_per_s'] / 1e12:.3f} | {_pct(d['frac_ceiling'])} | {_f(d['roofline_ms'])} | "
            f"{_f(d['device_ms_per_step'])} | {_pct(d['device_frac_ceiling'])} | {_pct(d['idle_share'])} | "
            f"{d['ref_gather_bytes'] / GB:.2f} | {_f(d['dispatch_ms_per_tick'])} | {_f(d.get('host_ms_per_dispatch'))} | "
            f"{_clocks(d.get('clocks_mhz'))} | {_pct(d.get('untraced_idle_share'))} | {_mode(d)} |"
        )
    return lines


def _mode(d: dict) -> str:
    """The traced tick's launch mode (device_trace.launch_mode): early, late, or n/a."""
    return launch_mode((d.get("traced_ticks") or {}).get("edges")) or "n/a"


def _clocks(c: dict | None) -> str:
    """SM clock read before and after the window (benchmarks/gpu_state.py), or n/a."""
    sm = [(c or {}).get(k) for k in ("before", "after")]
    return " / ".join("n/a" if x is None else str(x["sm"]) for x in sm)


def _speedups(r: dict) -> list[str]:
    out = []
    for ref in r["reference"]:
        fast = next((d for d in r["decode"] if (d["context"], d["concurrency"]) == (ref["context"], ref["concurrency"])), None)
        if fast:
            out.append(f"- context {ref['context']}, {ref['concurrency']} streams: kernels "
                       f"{fast['tok_s_aggregate']:.1f} tok/s vs reference {ref['tok_s_aggregate']:.1f} tok/s "
                       f"= {fast['tok_s_aggregate'] / ref['tok_s_aggregate']:.2f}x")
    return [""] + out if out else []


def _overlap(t: dict) -> str:
    """', K ms of kernel time (O ms overlapped)' where the trace has the kernels' summed time (older runs do not)."""
    kernel_ms = t.get("kernel_ms_per_tick")
    if kernel_ms is None:
        return ""
    return f", {kernel_ms:.2f} ms of kernel time: {kernel_ms - t['busy_ms_per_tick']:+.2f} ms overlapped"


def _kernel_tables(rows: list[dict]) -> list[str]:
    """Where each traced decode case spent its device time, by kernel family (numeric suffixes dropped)."""
    out = []
    for d in rows:
        t = d.get("traced_ticks") or {}
        if not t.get("top_kernels"):
            continue
        out += ["", f"### Device time by kernel: context {d['context']}, {d['concurrency']} streams "
                f"({t['ticks']} steady ticks, {t['busy_ms_per_tick']:.2f} ms busy per tick{_overlap(t)})", "",
                "| kernel | µs/tick | calls/tick | of busy |", "|---|---|---|---|"]
        for name, us, calls in t["top_kernels"]:
            out.append(f"| `{name[:80]}` | {us:.1f} | {calls:.0f} | {_pct(us / 1e3 / t['busy_ms_per_tick'])} |")
        if t.get("overlaps"):
            out += ["", "Overlapping kernels (a kernel that starts before the previous one ends):", "",
                    "| earlier | later | stream | µs/tick | times/tick |", "|---|---|---|---|---|"]
            out += [f"| `{a[:60]}` | `{b[:60]}` | {'same' if same else 'other'} | {us:.1f} | {times:.1f} |"
                    for a, b, same, us, times in t["overlaps"]]
        g = d.get("traced_graph_updates") or {}
        if g.get("graphs"):
            graphs = "; ".join(f"{n} commands: {k} ({us:.0f} µs each)" for n, k, us in g["graphs"])
            out += ["", f"CUDA graphs XLA re-recorded in the traced run ({g['decode_dispatches']} decode dispatches; "
                    f"it re-records a graph whose buffers moved), largest first: {graphs}"]
        if t.get("edges"):
            out += ["", "Launch edges (gap from the latest end before a kernel to its start; negative: early):", "",
                    "| earlier > later | edges/tick | median gap µs | gap µs/tick |", "|---|---|---|---|"]
            out += [f"| {k} | {n:.1f} | {med:.2f} | {tot:.1f} |" for k, n, med, tot in t["edges"]]
    return out


def render_markdown(r: dict) -> str:
    m, c, model = r["machine"], r["ceiling"], r["model"]
    lines = [
        f"# {r['preset']} on {m['device_kind']} ({r['date']})",
        "",
        "```",
        r["command"],
        "```",
        "",
        f"- machine: {m['device_kind']} x{m['num_devices']} ({m['platform']}), jax {m['jax']}, "
        f"jaxlib {m['jaxlib']}, Python {m['python']}, {m['host_cpus']} host CPUs",
        "- environment: " + (", ".join(f"`{k}={v}`" for k, v in m.get("environment", {}).items())
                             or "no DGJAX_* / XLA_* variables set (the defaults)"),
        f"- HBM read ceiling (this run, {c['read_bytes'] / GB:.2f} GB bf16 row sums, median of "
        f"{len(c['read_samples_s'])} x {c['read_calls']} async calls): **{c['read_bytes_per_s'] / 1e12:.3f} TB/s**"
        + (f"; again at the end of the run: {c['read_end_bytes_per_s'] / 1e12:.3f} TB/s"
           if c.get("read_end_bytes_per_s") else ""),
        f"- bf16 matmul ceiling (this run, {c['matmul_size']}³): {c['matmul_flops_per_s'] / 1e12:.1f} TFLOP/s",
        f"- model: {model['architecture']}, {model['layers']} layers, hidden {model['hidden']}, "
        f"{model['heads']}/{model['kv_heads']} heads x {model['head_dim']}, ffn {model['ffn']}, "
        f"vocab {model['vocab']}; weights {model['param_bytes'] / GB:.2f} GB {model['dtype']} (random, "
        f"created on the device); KV {model['kv_bytes_per_token'] / 1024:.1f} KiB per token",
    ]
    for i, e in enumerate(r["engines"]):
        lines.append(
            f"- engine {i + 1}: max_model_len {e['max_model_len']}, page size {e['page_size']}, "
            f"{e['num_pages']} pages, decode buckets {e['decode_buckets']}, prefill chunk {e['prefill_chunk']}, "
            f"prefix cache off; load + compile {e['startup_s']:.1f} s ({e['compile_summary']}); "
            f"serves decode {e['decode_cases']} and prefill {e['prefill_cases']}"
        )
    lines += ["", "## Decode (steady window: every stream decoding, no prefill in flight)", ""]
    lines += _decode_table(r["decode"])
    prints = [f"{d['context']} x {d['concurrency']}: `{d['greedy_sha1']}`" for d in r["decode"] if d.get("greedy_sha1")]
    if prints:  # runs of one seed and preset must agree here whatever the switches (benchmarks/traces.py)
        lines += ["", "Greedy tokens (sha1 of every stream's generated ids; context x streams): " + ", ".join(prints)]
    if r.get("reference"):
        lines += ["", "## Reference path, same run (plain-jnp attention, unfused projections)", ""]
        lines += _decode_table(r["reference"])
        lines += _speedups(r)
    lines += _kernel_tables(r["decode"])
    lines += ["", "## Cold prefill (one request, prefix cache off, time to first token)", ""]
    lines += [
        "| prompt tokens | chunks | TTFT s | prompt tok/s | ms/chunk | useful TFLOP | TFLOP/s | of matmul ceiling |",
        "|" + "---|" * 8,
    ]
    for p in r["prefill"]:
        lines.append(
            f"| {p['prompt_tokens']} | {p['chunks']} | {_f(p['ttft_s'], 3)} | {_f(p['tok_s'], 0)} | "
            f"{_f(p['ms_per_chunk'], 1)} | {_f(p['flops'] / 1e12, 2)} | {_f(p['flops_per_s'] / 1e12, 1)} | "
            f"{_pct(p['frac_matmul'])} |"
        )
    if r.get("errors"):
        lines += ["", "## Errors (the cases after these did not run)", ""]
        lines += [f"- `{e}`" for e in r["errors"]]
    lines += ["", "## How to read this", ""]
    lines += [f"- {n}" for n in r["notes"]]
    lines += ["", "## Phases (wall seconds)", ""]
    lines += [f"- {k}: {v:.1f}" for k, v in r["timings"].items()]
    return "\n".join(lines) + "\n"


def summary_table(results: list[dict]) -> str:
    """A compact text table of every preset's numbers (printed last, where the reply keeps it)."""
    out = []
    for r in results:
        c = r["ceiling"]
        kv = r.get("kv_cache_dtype")
        out.append(f"{r['preset']} (weights {r.get('quantize', 'none')}, KV {kv}) on {r['machine']['device_kind']}: read ceiling "
                   f"{c['read_bytes_per_s'] / 1e12:.3f} TB/s, matmul {c['matmul_flops_per_s'] / 1e12:.1f} TFLOP/s")
        out.append(f"{'ctx':>6} {'C':>3} {'ms/step':>8} {'tok/s/str':>9} {'tok/s':>8} {'GB/step':>8} "
                   f"{'%ceil':>6} {'dev ms':>7} {'%idle':>6} {'%idle untraced':>14} {'launches':>8}")
        for d in r["decode"] + r.get("reference", []):
            out.append(
                f"{d['context']:>6} {d['concurrency']:>3} {d['ms_per_step']:>8.2f} {d['tok_s_per_stream']:>9.1f} "
                f"{d['tok_s_aggregate']:>8.1f} {d['bytes_per_step'] / GB:>8.2f} {100 * d['frac_ceiling']:>5.1f}% "
                f"{_f(d['device_ms_per_step']):>7} {_pct(d['idle_share']):>6} "
                f"{_pct(d.get('untraced_idle_share')):>14} {_mode(d):>8}"
                + ("  reference path" if d in r.get("reference", []) else "")
            )
        out.append(f"{'prompt':>6} {'TTFT s':>8} {'tok/s':>9} {'TFLOP/s':>8} {'%mm':>6}")
        for p in r["prefill"]:
            out.append(f"{p['prompt_tokens']:>6} {p['ttft_s']:>8.3f} {p['tok_s']:>9.0f} "
                       f"{p['flops_per_s'] / 1e12:>8.1f} {100 * p['frac_matmul']:>5.1f}%")
        out += [f"ERROR {e}" for e in r.get("errors", [])]
        out.append("")
    return "\n".join(out)
