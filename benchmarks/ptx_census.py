"""What a Pallas kernel's inner loop compiles to, without a GPU: Triton IR from the real lowering, then (with
the `triton` package installed) TTGIR and PTX for sm_90 and a count of the PTX instructions by opcode.

Why: launch sweeps on the H200 cannot say why a kernel is slow. The MoE decode kernel's fp8 tiles ran at
30-60% of the read ceiling whatever the launch (session 5); this census of its compiled loop showed two
conversions per fp8 value (e4m3x2 -> f16x2, then an unpaired f16 -> bf16) where the bf16 path has none,
which is what `DGJAX_FP8_DOT=f16` removes. Counts are per compiled kernel (a loop body appears once,
unrolled steps each time); the Triton here is the pip package's, not the one inside jaxlib, so treat the
counts as a guide and time the change on the GPU.

    python -m benchmarks.ptx_census --preset glm-4.5-air --fmt fp8 --tokens 2 --out /tmp/census
    DGJAX_FP8_DOT=f16 python -m benchmarks.ptx_census --fmt fp8 --out /tmp/census16
    python -m benchmarks.ptx_census --preset qwen3-30b-a3b --x-dtype float16 --out /tmp/census_x16
`--x-dtype float16`: the stages on f16 rows, as the carried rows of dgjax/pallas/carrier.py reach them (session 22:
qwen3's gate/up loop then compiles to 935 PTX instructions against 1085, without the row max and its rescaling).
(needs `pip install triton` for the TTGIR/PTX part; the TTIR files are written without it)
"""

from __future__ import annotations

import argparse
import collections
import os
import re

import jax
import jax.numpy as jnp

from benchmarks.presets import PRESETS
from dgjax.config import ModelConfig
from dgjax.pallas.moe_decode import kernel
from dgjax.quant import Fp8BlockWeight

OPCODE = re.compile(r"^\s*(?:@%p\d+\s+)?([a-z][a-z0-9]*(?:\.[a-z0-9]+)*)", re.M)


def _node(fmt: str, experts: int, k: int, n: int):
    spec = jax.ShapeDtypeStruct
    if fmt == "plain":
        return spec((experts, k, n), jnp.bfloat16)
    return Fp8BlockWeight(weight=spec((experts, n, k), jnp.float8_e4m3fn),
                          scale=spec((experts, n // 128, k // 128), jnp.float32),
                          shape=(experts, k, n), in_dims=1, expert_dims=1)


def triton_modules(preset: str, fmt: str, tokens: int, x_dtype: str = "bfloat16") -> dict[str, str]:
    """Kernel name -> Triton IR text of the MoE decode stages at the preset's expert shapes, on `x_dtype` rows."""
    from jax._src.pallas.triton import lowering as triton_lowering

    cfg = ModelConfig.from_hf_dict(PRESETS[preset])
    e, h, f, top_k = cfg.num_experts, cfg.hidden_size, cfg.moe_intermediate_size, cfg.num_experts_per_tok
    gate, down = _node(fmt, e, h, f), _node(fmt, e, f, h)
    spec = jax.ShapeDtypeStruct
    args = (spec((tokens, h), jnp.dtype(x_dtype)), spec((tokens, top_k), jnp.int32), spec((tokens, top_k), jnp.float32),
            gate, gate, down)
    found: dict[str, str] = {}
    lower = triton_lowering.lower_jaxpr_to_triton_module

    def grab(*a, **kw):
        result = lower(*a, **kw)
        text = str(result.module)
        found[re.search(r"module @(\S+)", text).group(1)] = text
        return result

    triton_lowering.lower_jaxpr_to_triton_module = grab
    try:
        jax.jit(lambda *a: kernel.moe_decode(*a)).trace(*args).lower(lowering_platforms=("cuda",))
    finally:
        triton_lowering.lower_jaxpr_to_triton_module = lower
    return found


def census(ptx: str) -> collections.Counter:
    """PTX instruction counts by opcode (directives and labels skipped)."""
    return collections.Counter(m.group(1) for m in OPCODE.finditer(ptx) if not m.group(1).startswith("."))


def compile_sm90(ttir_path: str, num_warps: int = 4, num_stages: int = 3) -> tuple[str, str]:
    """(TTGIR, PTX) of a TTIR file for sm_90 with the pip `triton` package."""
    import triton
    from triton.backends.compiler import GPUTarget

    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    compiled = triton.compile(ttir_path, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    return compiled.asm["ttgir"], compiled.asm["ptx"]


def main(argv=None) -> dict[str, collections.Counter]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="glm-4.5-air", choices=sorted(PRESETS))
    p.add_argument("--fmt", default="fp8", choices=("fp8", "plain"))
    p.add_argument("--tokens", type=int, default=2)
    p.add_argument("--top", type=int, default=12, help="opcodes shown per kernel")
    p.add_argument("--x-dtype", choices=("bfloat16", "float16"), default="bfloat16", help="the stages' rows")
    p.add_argument("--out", default="/tmp/ptx_census")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    modules = triton_modules(args.preset, args.fmt, args.tokens, args.x_dtype)
    try:
        import triton  # noqa: F401
    except ImportError:
        triton = None
    counts = {}
    for name, text in modules.items():
        path = os.path.join(args.out, f"{name}.ttir")
        with open(path, "w") as fh:
            fh.write(text)
        if triton is None:
            print(f"{name}: wrote {path} (install `triton` for TTGIR/PTX and the census)")
            continue
        launch = re.search(r"_w(\d+)_st(\d+)", name)
        ttgir, ptx = compile_sm90(path, int(launch.group(1)), int(launch.group(2)))
        for ext, body in (("ttgir", ttgir), ("ptx", ptx)):
            with open(os.path.join(args.out, f"{name}.{ext}"), "w") as fh:
                fh.write(body)
        counts[name] = census(ptx)
        convert = sum(c for op, c in counts[name].items() if op.startswith("cvt"))
        print(f"{name}: {convert} conversions; " + ", ".join(f"{op} {c}" for op, c in counts[name].most_common(args.top)))
    return counts


if __name__ == "__main__":
    main()
