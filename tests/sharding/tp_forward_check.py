"""Run as a script with 4 fake CPU devices: tensor-parallel forward (tp=4) equals single-device forward.

Kept out of the pytest process because XLA_FLAGS must be set before jax initialises its backend.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"

import dataclasses  # noqa: E402
import functools  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from dgjax.models import llama  # noqa: E402
from dgjax.models.batch import ForwardBatch, create_kv_cache  # noqa: E402
from dgjax.models.hf_config import parse_hf_config  # noqa: E402
from dgjax.models.params import init_params, normal_init, param_shardings  # noqa: E402
from dgjax.sharding import DEFAULT_RULES, make_mesh  # noqa: E402

PAGE, PAGES, MAX_PAGES = 4, 32, 6
BASE = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 256, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 16,
        "attention_bias": True, "tie_word_embeddings": False, "dtype": "float32"}


def _vectors_random(specs):
    """Give norms and biases random values too (their default init is 1 / 0)."""
    return jax.tree_util.tree_map(lambda s: dataclasses.replace(s, init=normal_init(0.3)), specs,
                                  is_leaf=lambda x: hasattr(x, "init"))


def _batches():
    """Two steps of one shape (3 rows x 8): prefill; then a decode row next to a prefill chunk (mixed)."""
    tables = jnp.asarray([[7, 3, 20, 0, 0, 0], [12, 5, 9, 0, 0, 0], [0] * 6], jnp.int32)
    first = ForwardBatch(  # rows prefill 8 and 5 tokens; row 2 is padding; padding positions are garbage
        tokens=jnp.asarray(np.arange(24).reshape(3, 8) * 7 % 256, jnp.int32),
        positions=jnp.asarray([list(range(8)), [0, 1, 2, 3, 4, 0, 0, 9], [0] * 8], jnp.int32),
        query_lens=jnp.asarray([8, 5, 0], jnp.int32),
        block_tables=tables,
        context_lens=jnp.asarray([8, 5, 0], jnp.int32),
    )
    second = ForwardBatch(  # row 0 decodes one token, row 1 prefills 3 more
        tokens=jnp.asarray(np.arange(24).reshape(3, 8) * 5 % 256, jnp.int32),
        positions=jnp.asarray([[8, 0, 0, 0, 0, 0, 0, 0], [5, 6, 7, 1, 1, 1, 1, 1], [3] * 8], jnp.int32),
        query_lens=jnp.asarray([1, 3, 0], jnp.int32),
        block_tables=tables,
        context_lens=jnp.asarray([9, 8, 0], jnp.int32),
    )
    return first, second


@functools.partial(jax.jit, static_argnames="cfg")
def _step(params, kv, batch, cfg):
    hidden, kv = llama.forward(params, kv, batch, cfg)
    return llama.logits(params, hidden, cfg), kv


def _run(params, cfg, mesh):
    kv = create_kv_cache(cfg, PAGES, PAGE, jnp.float32, mesh, DEFAULT_RULES)
    outs = []
    for batch in _batches():
        logits, kv = _step(params, kv, batch, cfg)
        outs.append(np.asarray(logits))
    return outs, kv


def check(kv_heads: int) -> float:
    cfg = parse_hf_config({**BASE, "num_key_value_heads": kv_heads}, {})
    specs = _vectors_random(llama.param_specs(cfg))
    mesh4, mesh1 = make_mesh(4), make_mesh(1)
    params4 = init_params(specs, jax.random.key(0), mesh4, DEFAULT_RULES)
    q = params4.layers[0].attn.q
    assert q.sharding.spec[1] == "tp" and q.addressable_shards[0].data.shape == (64, 2, 16), q.sharding
    host = jax.tree_util.tree_map(np.asarray, params4)
    params1 = jax.device_put(host, param_shardings(specs, mesh1, DEFAULT_RULES))
    (out4, kv4), (out1, kv1) = _run(params4, cfg, mesh4), _run(params1, cfg, mesh1)
    kv_sharding = kv4.k[0].sharding
    if kv_heads % 4 == 0:
        assert kv_sharding.spec[2] == "tp", kv_sharding
    else:
        assert kv_sharding.is_fully_replicated, kv_sharding
    worst = 0.0
    for a, b in zip(out4 + list(kv4.k + kv4.v), out1 + list(kv1.k + kv1.v)):
        worst = max(worst, float(np.max(np.abs(np.asarray(a) - np.asarray(b)))))
    assert worst <= 1e-5, worst
    return worst


if __name__ == "__main__":
    assert len(jax.devices()) == 4, jax.devices()
    for kv_heads in (4, 2):  # sharded KV heads, and 2 KV heads on 4 devices (replicated)
        print(f"kv_heads={kv_heads} max_abs_diff={check(kv_heads):.3g}")
    print("TP_OK")
