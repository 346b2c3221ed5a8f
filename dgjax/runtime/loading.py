"""Turn a model folder and an EngineConfig into ready device objects: mesh, weights, KV pool, executor.

The KV pool is sized from a memory plan that is logged: what the weights take, what the pool gets,
how many tokens that holds, and how many pages a single sequence can span.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import logging
import math
import time

import jax
import jax.numpy as jnp

from dgjax import sharding
from dgjax.checkpoint.convert import leaf_converter, parse_quantize
from dgjax.checkpoint.hf_names import hf_sources
from dgjax.checkpoint.loader import load_params
from dgjax.config import EngineConfig, ModelConfig
from dgjax.pallas.paged_attention.api import ENV_VAR as ATTENTION_ENV
from dgjax.models.fused import fuse_projections
from dgjax.models.params import init_params, resolve_dtype
from dgjax.models.batch import create_kv_cache, kv_bytes_per_page, resolve_kv_cache_dtype
from dgjax.models.registry import get_family
from dgjax.quant import is_quantized
from dgjax.runtime.device_state import create_device_state
from dgjax.runtime.executor import Executor
from dgjax.runtime.page_pool import PagePool

log = logging.getLogger("dgjax.engine")

SINGLE_DEVICE_KERNEL_ENVS = ("DGJAX_MOE_KERNEL", "DGJAX_MOE_PREFILL", "DGJAX_QUANT_GEMV", "DGJAX_MOE_ROUTING",
                             "DGJAX_ADD_NORM")
FUSE_ENV = "DGJAX_FUSE_PROJECTIONS"  # "0" keeps q/k/v and gate/up unfused (benchmarks' reference path)
CPU_KV_BUDGET = 1 << 30  # bytes; CPU runs are tests and notebooks
GPU_KV_FRACTION = 0.85  # of the memory left after the weights


@dataclasses.dataclass
class LoadedModel:
    family: object
    mesh: object
    params: object
    pool: PagePool
    executor: Executor
    dtype: object


def _free_device_bytes(device) -> int | None:
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if not stats or "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def plan_num_pages(cfg: ModelConfig, ecfg: EngineConfig, max_model_len: int, dtype, mesh) -> int:
    """Pages for the KV pool: explicit, or from a byte budget, never fewer than one full sequence.

    `dtype` is the KV cache's page dtype (float8_e4m3fn pages also hold their scales).
    """
    page_bytes = kv_bytes_per_page(cfg, ecfg.page_size, dtype)
    pages_per_seq = math.ceil(max_model_len / ecfg.page_size)
    wanted = ecfg.max_concurrency * pages_per_seq + 1
    if ecfg.num_pages is not None:
        num = ecfg.num_pages
    else:
        budget = ecfg.kv_memory_bytes
        if budget is None:
            free = _free_device_bytes(mesh.devices.flat[0])
            if free is None or mesh.devices.flat[0].platform == "cpu":
                budget = CPU_KV_BUDGET
            else:
                budget = int(free * GPU_KV_FRACTION * mesh.size)
        num = min(wanted, int(budget // page_bytes))
    if num < pages_per_seq + 1:
        raise ValueError(
            f"the KV pool holds {num} pages of {ecfg.page_size} tokens, fewer than one "
            f"{max_model_len}-token sequence needs ({pages_per_seq} + 1 trash page): lower "
            "--max-model-len or give the cache more memory"
        )
    log.info(
        "memory plan: KV page (%s) = %d tokens x %.1f KiB; pool = %d pages (%.1f MiB, %d tokens); "
        "a sequence spans up to %d pages (max_model_len %d)",
        jnp.dtype(dtype).name, ecfg.page_size, page_bytes / 1024, num, num * page_bytes / 2**20,
        (num - 1) * ecfg.page_size, pages_per_seq, max_model_len,
    )
    return num


def _keep_kernels_off_sharded_meshes(mesh) -> None:
    """The Pallas attention kernels have no partitioning rule yet: on a tensor-parallel mesh XLA would
    all-gather every layer's KV pages around them each step. Until they run under shard_map, a sharded
    engine uses the reference attention unless the user chose otherwise."""
    if mesh.size > 1 and not os.environ.get(ATTENTION_ENV):
        os.environ[ATTENTION_ENV] = "ref"
        log.info("tensor parallel %d: attention uses the reference path (%s=ref); the Pallas kernels "
                 "are single-device for now", mesh.size, ATTENTION_ENV)
    for env in SINGLE_DEVICE_KERNEL_ENVS:  # the same for the MoE and quantized-GEMV kernels
        if mesh.size > 1 and not os.environ.get(env):
            os.environ[env] = "ref"
            log.info("tensor parallel %d: %s=ref (single-device kernel)", mesh.size, env)


def sharding_rules(ecfg: EngineConfig, cfg: ModelConfig) -> sharding.ShardingRules:
    """The logical-axis table for this engine: expert parallel for MoE models when asked."""
    if ecfg.expert_parallel and cfg.num_experts > 0:
        log.info("expert parallel: %d experts over %d devices", cfg.num_experts, ecfg.tensor_parallel)
        return sharding.EXPERT_PARALLEL_RULES
    return sharding.DEFAULT_RULES


def _formats(params) -> str:
    """", 224 weights bf12, 1 fp8_block" for the packed nodes in `params` (what --quantize or the checkpoint gave)."""
    counts = collections.Counter(leaf.format_name for leaf in jax.tree.leaves(params, is_leaf=is_quantized)
                                 if is_quantized(leaf))
    return "".join(f", {n} weights {fmt}" for fmt, n in sorted(counts.items()))


def load_model(model_dir: str, cfg: ModelConfig, ecfg: EngineConfig, max_model_len: int) -> LoadedModel:
    family = get_family(cfg)
    dtype = resolve_dtype(cfg.torch_dtype, ecfg.dtype)
    mesh = sharding.make_mesh(ecfg.tensor_parallel)
    _keep_kernels_off_sharded_meshes(mesh)
    rules = sharding_rules(ecfg, cfg)
    t0 = time.perf_counter()
    if ecfg.load_format == "dummy":
        specs = family.param_specs(cfg, dtype)
        opts = parse_quantize(ecfg.quantize)
        convert = leaf_converter(specs, hf_sources(cfg), opts, mesh, rules) if opts.active else None
        params = init_params(specs, jax.random.key(ecfg.seed), mesh, rules, transform=convert)
    elif ecfg.load_format == "safetensors":
        params = load_params(model_dir, cfg, dtype, mesh, rules, quantize=ecfg.quantize)
    else:
        raise ValueError(f"unknown load_format {ecfg.load_format!r} (safetensors | dummy)")
    if os.environ.get(FUSE_ENV, "1") != "0":
        params = fuse_projections(params, mesh, rules)
    else:
        log.info("%s=0: q/k/v and gate/up stay separate projections", FUSE_ENV)
    jax.block_until_ready(params)
    nbytes = sum(x.nbytes for x in jax.tree.leaves(params))
    log.info("weights: %.1f MiB in %s%s loaded in %.2fs on %d device(s) (%s)",
             nbytes / 2**20, jnp.dtype(dtype).name, _formats(params), time.perf_counter() - t0, mesh.size,
             mesh.devices.flat[0].platform)
    kv_dtype = resolve_kv_cache_dtype(ecfg.kv_cache_dtype, dtype)
    num_pages = plan_num_pages(cfg, ecfg, max_model_len, kv_dtype, mesh)
    kv = create_kv_cache(cfg, num_pages, ecfg.page_size, kv_dtype, mesh, rules)
    log.info("KV cache: %d layers in %d K and %d V array(s) of up to %d layers each",
             cfg.num_hidden_layers, len(kv.k), len(kv.v), kv.layers_per_pool)
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    state = create_device_state(kv, ecfg.max_concurrency, cfg.vocab_size, replicated)
    pool = PagePool(num_pages, ecfg.page_size, enable_prefix_cache=ecfg.enable_prefix_cache)
    executor = Executor(
        family, cfg, mesh, params, state,
        decode_buckets=ecfg.used_decode_buckets(),
        prefill_buckets=ecfg.prefill_buckets,
        max_pages_per_seq=math.ceil(max_model_len / ecfg.page_size),
        aot_logprob_variants=ecfg.aot_logprob_variants,
        aot_structured_variants=ecfg.aot_structured_variants,
    )
    return LoadedModel(family, mesh, params, pool, executor, dtype)
