"""The model-step interface the executor builds: a batch of token rows and the paged KV cache.

Row b's real tokens are tokens[b, :query_lens[b]] at consecutive positions positions[b, :query_lens[b]];
their K/V go to slot block_tables[b, p // page_size] * page_size + p % page_size. Padding tokens
write only into page 0, the trash page, which never holds real data. A query at position p attends to
its own row's keys at positions 0..p (earlier steps' and this step's), limited by the sliding window.
Decode is T=1, a prefill chunk B=1, T=chunk; mixed batches are allowed.
"""

from __future__ import annotations

import flax
import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from dgjax.config import ModelConfig
from dgjax.models.params import ParamSpec, map_specs, param_shardings, zeros_init
from dgjax.pallas.paged_attention.api import FP8_DTYPE, QuantizedPages
from dgjax.sharding import ShardingRules


@flax.struct.dataclass
class ForwardBatch:
    tokens: jax.Array  # int32 [B, T]
    positions: jax.Array  # int32 [B, T] absolute positions; value for padding tokens is arbitrary
    query_lens: jax.Array  # int32 [B] real tokens at the start of each row (0 for padding rows)
    block_tables: jax.Array  # int32 [B, P] page ids; page 0 is the trash page: never holds real data
    context_lens: jax.Array  # int32 [B] KV length of the row after this step (0 for padding rows)


@flax.struct.dataclass
class KVCache:
    """K and V pages in pools that each hold a run of consecutive layers: arrays [layers_per_pool * num_pages,
    page_size, kv_heads, head_dim] in the cache dtype, or for an fp8 cache `QuantizedPages` (e4m3 values of
    that shape + float32 scales [layers_per_pool * num_pages, page_size, kv_heads]). Layer i lives in pool
    i // layers_per_pool, where it owns pages [j * num_pages, (j + 1) * num_pages) for j = i % layers_per_pool:
    its page p is that pool's page j * num_pages + p (`page_offset`).

    Why pools, not one array per layer: every array is an argument (and, donated, a result) of each step call,
    and on the H200 each costs the host ~1.4 µs per call (benchmarks/results/2026-12-01-s6d-host-cost.md): the
    96 per-layer caches of a 48-layer model were ~190 buffers per tick. The kernels read pages through block
    tables, so shifting a layer's tables and slots by its page offset is all a layer needs; the shifts depend
    only on the step's batch. Why not one pool for all layers: the Pallas kernels index pages with int32
    element offsets, so a pool stays under 2**31 elements (`MAX_POOL_ELEMENTS`)."""

    k: tuple[jax.Array | QuantizedPages, ...]
    v: tuple[jax.Array | QuantizedPages, ...]
    layers_per_pool: int = flax.struct.field(pytree_node=False, default=1)

    @property
    def page_size(self) -> int:
        return self.k[0].shape[1]

    @property
    def num_pages(self) -> int:
        """Pages per layer (the page pool's size)."""
        return self.k[0].shape[0] // self.layers_per_pool

    def pool_of(self, layer: int) -> int:
        return layer // self.layers_per_pool

    def page_offset(self, layer: int) -> int:
        """Where `layer`'s pages start in its pool: per-layer page ids plus this are pool page ids (the attention
        shifts block tables and slots by it: dgjax.pallas.paged_attention.api.offset_pages)."""
        return (layer % self.layers_per_pool) * self.num_pages


MAX_POOL_ELEMENTS = 2**31 - 1  # int32 element offsets inside the attention kernels


def layers_per_pool(num_layers: int, layer_elements: int) -> int:
    """How many consecutive layers share a pool: as many as stay under MAX_POOL_ELEMENTS (at least one)."""
    return max(1, min(num_layers, MAX_POOL_ELEMENTS // max(1, layer_elements)))


KV_AXES = ("pages", None, "kv_heads", "head_dim")
KV_SCALE_AXES = ("pages", None, "kv_heads")  # scales shard like the heads they scale
KV_SCALE_DTYPE = jnp.float32
KV_CACHE_DTYPES = ("auto", "bfloat16", "float32", "fp8_e4m3", "fp8")  # "fp8" is vLLM's alias of fp8_e4m3


def resolve_kv_cache_dtype(kv_cache_dtype: str, model_dtype) -> jnp.dtype:
    """The cache's page dtype: "auto" -> the model dtype, "fp8"/"fp8_e4m3" -> float8_e4m3fn (scaled pages)."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ValueError(f"kv_cache_dtype must be one of {KV_CACHE_DTYPES}, got {kv_cache_dtype!r}")
    if kv_cache_dtype in ("fp8", "fp8_e4m3"):
        return FP8_DTYPE
    return jnp.dtype(model_dtype) if kv_cache_dtype == "auto" else jnp.dtype(kv_cache_dtype)


def is_scaled_kv_dtype(dtype) -> bool:
    """Whether pages of this dtype carry per-(slot, kv head) scales (QuantizedPages)."""
    return jnp.dtype(dtype) == FP8_DTYPE


def kv_cache_specs(cfg: ModelConfig, num_pages: int, page_size: int, dtype) -> KVCache:
    """The cache as a KVCache of ParamSpecs (zeros), for shardings and AOT lowering; fp8: QuantizedPages specs.
    `num_pages` per layer; the pools hold that many for every layer."""
    n = cfg.num_hidden_layers
    per_pool = layers_per_pool(n, num_pages * page_size * cfg.num_key_value_heads * cfg.head_dim)
    pools = []
    for first in range(0, n, per_pool):
        shape = (min(per_pool, n - first) * num_pages, page_size, cfg.num_key_value_heads, cfg.head_dim)
        spec = ParamSpec(shape, dtype, KV_AXES, zeros_init)
        if is_scaled_kv_dtype(dtype):
            spec = QuantizedPages(values=spec, scales=ParamSpec(shape[:3], KV_SCALE_DTYPE, KV_SCALE_AXES, zeros_init))
        pools.append(spec)
    return KVCache(k=tuple(pools), v=tuple(pools), layers_per_pool=per_pool)


def kv_cache_shardings(cfg: ModelConfig, num_pages: int, page_size: int, dtype, mesh: Mesh, rules: ShardingRules):
    return param_shardings(kv_cache_specs(cfg, num_pages, page_size, dtype), mesh, rules)


def create_kv_cache(
    cfg: ModelConfig, num_pages: int, page_size: int, dtype, mesh: Mesh, rules: ShardingRules
) -> KVCache:
    """A zeroed cache, its K and V pools created directly in their sharding."""
    specs = kv_cache_specs(cfg, num_pages, page_size, dtype)
    shardings = param_shardings(specs, mesh, rules)
    make = lambda: map_specs(lambda s: jnp.zeros(s.shape, s.dtype), specs)  # noqa: E731
    return jax.jit(make, out_shardings=shardings)()


def kv_bytes_per_page(cfg: ModelConfig, page_size: int, dtype) -> int:
    """Bytes one page takes across all layers, K and V (with their scales for fp8)."""
    per_layer = page_size * cfg.num_key_value_heads * cfg.head_dim * jnp.dtype(dtype).itemsize
    if is_scaled_kv_dtype(dtype):
        per_layer += page_size * cfg.num_key_value_heads * jnp.dtype(KV_SCALE_DTYPE).itemsize
    return 2 * cfg.num_hidden_layers * per_layer
