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
    k: tuple[jax.Array, ...]  # per layer [num_pages, page_size, kv_heads, head_dim]
    v: tuple[jax.Array, ...]

    @property
    def page_size(self) -> int:
        return self.k[0].shape[1]

    @property
    def num_pages(self) -> int:
        return self.k[0].shape[0]


KV_AXES = ("pages", None, "kv_heads", "head_dim")


def kv_cache_specs(cfg: ModelConfig, num_pages: int, page_size: int, dtype) -> KVCache:
    """The cache as a KVCache of ParamSpecs (zeros), for shardings and AOT lowering."""
    spec = ParamSpec((num_pages, page_size, cfg.num_key_value_heads, cfg.head_dim), dtype, KV_AXES, zeros_init)
    n = cfg.num_hidden_layers
    return KVCache(k=(spec,) * n, v=(spec,) * n)


def kv_cache_shardings(cfg: ModelConfig, num_pages: int, page_size: int, dtype, mesh: Mesh, rules: ShardingRules):
    return param_shardings(kv_cache_specs(cfg, num_pages, page_size, dtype), mesh, rules)


def create_kv_cache(
    cfg: ModelConfig, num_pages: int, page_size: int, dtype, mesh: Mesh, rules: ShardingRules
) -> KVCache:
    """A zeroed cache, each layer's K and V created directly in its sharding."""
    specs = kv_cache_specs(cfg, num_pages, page_size, dtype)
    shardings = param_shardings(specs, mesh, rules)
    make = lambda: map_specs(lambda s: jnp.zeros(s.shape, s.dtype), specs)  # noqa: E731
    return jax.jit(make, out_shardings=shardings)()


def kv_bytes_per_page(cfg: ModelConfig, page_size: int, dtype) -> int:
    """Bytes one page takes across all layers, K and V."""
    per_layer = page_size * cfg.num_key_value_heads * cfg.head_dim * jnp.dtype(dtype).itemsize
    return 2 * cfg.num_hidden_layers * per_layer
