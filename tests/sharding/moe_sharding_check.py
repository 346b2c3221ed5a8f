"""Run as a script with 4 fake CPU devices: MoE models sharded tensor-parallel (tp=2, 4: each expert's
hidden units split) or expert-parallel (ep=2, 4: whole experts split) load the same weights and give the
same logits and KV cache as one device, through both expert paths (ragged_dot and gathered). Each family
runs one tensor-parallel and one expert-parallel layout (together: every layout), to keep compiles few.

Kept out of the pytest process because XLA_FLAGS must be set before jax initialises its backend.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"

import functools  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from dgjax.checkpoint.loader import load_params  # noqa: E402
from dgjax.config import ModelConfig  # noqa: E402
from dgjax.models.batch import ForwardBatch, create_kv_cache  # noqa: E402
from dgjax.models.registry import get_family  # noqa: E402
from dgjax.sharding import DEFAULT_RULES, EXPERT_PARALLEL_RULES, make_mesh  # noqa: E402

PAGE, PAGES = 4, 32
TINY = dict(vocab_size=96, hidden_size=64, intermediate_size=64, moe_intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=8, num_key_value_heads=4, head_dim=16, num_experts_per_tok=2,
            max_position_embeddings=64, initializer_range=0.1)
# name -> (transformers config class, overrides, [(layout kind, devices, rules)])
MODELS = {
    "qwen3_moe": (transformers.Qwen3MoeConfig, dict(num_experts=8, norm_topk_prob=True),
                  [("tp", 2, DEFAULT_RULES), ("ep", 4, EXPERT_PARALLEL_RULES)]),
    "glm4_moe": (transformers.Glm4MoeConfig, dict(n_routed_experts=8, n_group=2, topk_group=1,
                                                  first_k_dense_replace=1, use_qk_norm=True, attention_bias=True,
                                                  num_nextn_predict_layers=0),
                 [("tp", 4, DEFAULT_RULES), ("ep", 2, EXPERT_PARALLEL_RULES)]),
}


def _batches():
    """Prefill (2 rows x 8, one padding row: ragged_dot path), then one decode token (gathered path)."""
    tables = jnp.asarray([[7, 3, 20, 0], [12, 5, 9, 0], [0] * 4], jnp.int32)
    prefill = ForwardBatch(
        tokens=jnp.asarray(np.arange(24).reshape(3, 8) * 7 % 96, jnp.int32),
        positions=jnp.asarray([list(range(8)), [0, 1, 2, 3, 4, 0, 0, 9], [0] * 8], jnp.int32),
        query_lens=jnp.asarray([8, 5, 0], jnp.int32),
        block_tables=tables,
        context_lens=jnp.asarray([8, 5, 0], jnp.int32),
    )
    decode = ForwardBatch(
        tokens=jnp.asarray([[11]], jnp.int32), positions=jnp.asarray([[8]], jnp.int32),
        query_lens=jnp.asarray([1], jnp.int32), block_tables=tables[:1], context_lens=jnp.asarray([9], jnp.int32),
    )
    return prefill, decode


@functools.partial(jax.jit, static_argnames="cfg")
def _step(params, kv, batch, cfg):
    family = get_family(cfg)
    hidden, kv = family.forward(params, kv, batch, cfg)
    return family.logits(params, hidden, cfg), kv


def _run(params, cfg, mesh, rules):
    kv = create_kv_cache(cfg, PAGES, PAGE, jnp.float32, mesh, rules)
    outs = []
    for batch in _batches():
        logits, kv = _step(params, kv, batch, cfg)
        outs.append(np.asarray(logits))
    return outs + [np.asarray(a) for a in kv.k + kv.v]


def check(name: str, path: str) -> None:
    config_cls, overrides, layouts = MODELS[name]
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config_cls(**TINY, **overrides), dtype=torch.float32)
    model.save_pretrained(path)
    cfg = ModelConfig.from_dir(path)
    base_params = load_params(path, cfg, "float32", make_mesh(1), DEFAULT_RULES)
    base = _run(base_params, cfg, make_mesh(1), DEFAULT_RULES)
    for kind, n, rules in layouts:
        mesh = make_mesh(n)
        params = load_params(path, cfg, "float32", mesh, rules)
        gate = params.layers[1].ffn.experts.gate
        expected_spec = ("tp", None, None) if kind == "ep" else (None, None, "tp")
        assert tuple(gate.sharding.spec) == expected_spec, (kind, n, gate.sharding.spec)
        assert gate.addressable_shards[0].data.shape == ((8 // n, 64, 32) if kind == "ep" else (8, 64, 32 // n))
        for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(base_params)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        worst = max(float(np.max(np.abs(a - b))) for a, b in zip(_run(params, cfg, mesh, rules), base))
        print(f"{name} {kind}={n}: max_abs_diff={worst:.3g}")
        assert worst <= 1e-5, (name, kind, n, worst)


if __name__ == "__main__":
    assert len(jax.devices()) == 4, jax.devices()
    with tempfile.TemporaryDirectory() as tmp:
        for model_name in sys.argv[1:] or sorted(MODELS):
            check(model_name, os.path.join(tmp, model_name))
    print("MOE_SHARDING_OK")
