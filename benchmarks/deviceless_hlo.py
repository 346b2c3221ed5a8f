"""Compile a preset's decode executable for the H200 on a machine without a GPU; list one layer's launches.

Why: the launch structure of a decode tick (which XLA fusions and Pallas kernels run per layer) decides much
of a small-batch tick's device time, and reading it should not need a lent GPU. XLA's GPU compiler runs
deviceless from a target description (jax.experimental.topologies with the CUDA plugin installed; no driver
needed). The kernels' apis pick the Pallas path when `jax.default_backend()` is "gpu", so the trace is told
it is; parameters and state are built on the CPU (random, `--layers` layers of the preset's shapes) and
handed to the compiler as abstract arrays on the topology's device.

Checked against the H200: at the engine's width for one stream (2 rows), qwen3-30b-a3b fp8's layer listing
here is the one the H200's own HLO gives, launch for launch (benchmarks/results/2026-12-01-s8g-*). At
1 row, which the engine never runs, XLA compiles some dots and norms differently, so the width is raised to
the engine's bucket. Limits: XLA cannot autotune without a device, so its own dots (router, lm_head, dense
projections) may still pick other tilings than on the H200. Those rows are marked `*`. And a count is not
a timing: the session 8 cuts that lost on the H200 had looked as good here as the ones that won.

    python -m venv /work/venv-aot && /work/venv-aot/bin/pip install "jax[cuda13]==$(python -c 'import jax;
        print(jax.__version__)')" && /work/venv-aot/bin/pip install -e .
    /work/venv-aot/bin/python -m benchmarks.deviceless_hlo --preset qwen3-30b-a3b --quantize fp8 --layers 4 \\
        --layer 2 --out /tmp/hlo

Per-layer launches: the difference of two runs' per-tick totals (e.g. --layers 2 and 4) over the layers added;
`--target cpu` compiles for the CPU instead (no CUDA plugin needed; the tests run it).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import tempfile

os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")  # no driver here to report versions

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import topologies  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

from benchmarks.dump_decode_hlo import entry_launches, layer_launches  # noqa: E402
from benchmarks.presets import PRESETS, write_model_dir  # noqa: E402
from dgjax.config import EngineConfig, ModelConfig  # noqa: E402
from dgjax.runtime import param_packing, steps  # noqa: E402
from dgjax.pallas import pdl  # noqa: E402
from dgjax.runtime.loading import load_model  # noqa: E402

# The H200 as XLA's GPU compiler sees it (132 SMs, sm_90, 50 MiB L2): numbers from its device query.
H200_TARGET = """
gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: 4800000000000
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: 150754820096
  shared_memory_per_block_optin: 232448
  cuda_compute_capability { major: 9 minor: 0 }
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}
platform_name: "CUDA"
dnn_version_info { major: 9 minor: 10 }
runtime_version { major: 13 minor: 0 }
device_description_str: "NVIDIA H200"
"""
XLA_DOT_KINDS = ("gemm_fusion", "cublas", "__cublas", "triton_gemm")


def h200_mesh():
    topo = topologies.get_topology_desc(platform="cuda", target_config=H200_TARGET, topology="1x1x1")
    return topologies.make_mesh(topo, (1,), ("tp",))


def on_mesh(tree, mesh):
    """Abstract copies of `tree`'s arrays, each with its partition spec on `mesh`."""
    def one(a):
        spec = getattr(a.sharding, "spec", PartitionSpec())
        return jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, spec))
    return jax.tree.map(one, tree)


@contextlib.contextmanager
def backend_says_gpu():
    """Kernel apis read jax.default_backend() at trace time to choose Pallas over the reference."""
    real = jax.default_backend
    jax.default_backend = lambda: "gpu"
    try:
        yield
    finally:
        jax.default_backend = real


def model_dir_with_layers(preset: str, layers: int) -> str:
    dest = write_model_dir(preset, tempfile.mkdtemp(prefix="dgjax-deviceless-"))
    cfg = dict(PRESETS[preset], num_hidden_layers=layers)
    with open(os.path.join(dest, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return dest


def decode_hlo(preset: str, quantize: str | None, layers: int, width: int, target: str = "h200") -> str:
    """The optimized HLO of the decode tick for `width` rows (at the engine's bucket for them, no top-logprobs)
    compiled for the H200 (or, with target "cpu", for this machine's CPU, reference kernels and all: what the
    tests can run)."""
    ecfg = EngineConfig(dtype="bfloat16", load_format="dummy", max_model_len=2064, max_concurrency=max(2, width),
                        decode_buckets=(width,), prefill_buckets=(64,), enable_prefix_cache=False,
                        aot_logprob_variants=False, aot_structured_variants=False, quantize=quantize)
    model_dir = model_dir_with_layers(preset, layers)
    cfg = ModelConfig.from_dir(model_dir)
    ex = load_model(model_dir, cfg, ecfg, ecfg.resolved_max_model_len(cfg)).executor  # CPU arrays, nothing compiled
    width = ex.decode_width(width)  # the engine's bucket for that many rows (one stream decodes at width 2)
    mesh = h200_mesh() if target == "h200" else ex.mesh
    p_abs, s_abs = on_mesh(ex.call_params, mesh), on_mesh(ex.state, mesh)
    repl = NamedSharding(mesh, PartitionSpec())
    arg = lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype, sharding=repl)  # noqa: E731
    sampling = jax.tree.map(lambda a: arg(a.shape, a.dtype), ex._sampling_abstract(width))
    args = (p_abs, s_abs, arg((width,), jnp.int32), arg((width, ex.max_pages_per_seq), jnp.int32),
            arg((width,), jnp.bool_), sampling)
    fn = param_packing.taking_packed(steps.bind(steps.decode_tick, family=ex.family, cfg=ex.cfg, num_top=0))
    out_sh = (jax.tree.map(lambda a: a.sharding, s_abs), repl)
    with backend_says_gpu() if target == "h200" else contextlib.nullcontext(), pdl.model_default(ex.pdl_mode):
        lowered = jax.jit(fn, donate_argnums=(1,), out_shardings=out_sh).trace(*args).lower()
    return lowered.compile().as_text()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="qwen3-30b-a3b")
    p.add_argument("--quantize", default=None)
    p.add_argument("--layers", type=int, default=2, help="layers to build (all of a family's layers compile alike)")
    p.add_argument("--layer", type=int, default=1, help="the layer whose launches are listed")
    p.add_argument("--width", type=int, default=1, help="decode rows (compiled at the engine's bucket for them: 2 for 1)")
    p.add_argument("--target", choices=("h200", "cpu"), default="h200")
    p.add_argument("--out", default=".")
    a = p.parse_args()
    hlo = decode_hlo(a.preset, a.quantize, a.layers, a.width, a.target)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "decode.hlo.txt"), "w") as f:
        f.write(hlo)
    total = entry_launches(hlo)
    print(f"{a.preset} {a.quantize or 'bf16'} {a.width} rows, {a.layers} layers: {sum(total.values())} launches "
          f"per tick {dict(total)}")
    rows = layer_launches(hlo, a.layer)
    kinds = collections.Counter(k for _, k, _ in rows)
    print(f"{a.preset} {a.quantize or 'bf16'} {a.width} rows ({a.target} target): layer {a.layer} has "
          f"{len(rows)} launches {dict(kinds)}")
    for name, kind, scopes in rows:
        mark = " *" if any(d in name or d in kind for d in XLA_DOT_KINDS) else ""
        print(f"  {name:40s} {kind:28s} {', '.join(scopes)[:200]}{mark}")


if __name__ == "__main__":
    main()
