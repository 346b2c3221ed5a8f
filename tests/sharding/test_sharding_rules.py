"""Logical axes -> PartitionSpecs: divisibility fallback, axis reuse, and mesh construction."""

from __future__ import annotations

import jax
import pytest
from jax.sharding import PartitionSpec

from dgjax.models import llama
from dgjax.models.batch import kv_cache_specs
from dgjax.models.hf_config import parse_hf_config
from dgjax.models.params import abstract_params, map_specs
from dgjax.sharding import DEFAULT_RULES, ShardingRules, logical_to_spec, make_mesh

TP4 = {"tp": 4}


def test_tensor_parallel_axes_split_only_when_divisible():
    assert logical_to_spec(TP4, DEFAULT_RULES, (64, 8, 16), ("embed", "heads", "head_dim")) == PartitionSpec(None, "tp", None)
    assert logical_to_spec(TP4, DEFAULT_RULES, (64, 2, 16), ("embed", "kv_heads", "head_dim")) == PartitionSpec(None, None, None)
    assert logical_to_spec(TP4, DEFAULT_RULES, (64, 250), ("embed", "vocab")) == PartitionSpec(None, None)
    assert logical_to_spec(TP4, DEFAULT_RULES, (3, 5), (None, "made_up")) == PartitionSpec(None, None)


def test_a_mesh_axis_is_used_once_per_tensor_and_missing_mesh_axes_are_ignored():
    assert logical_to_spec(TP4, DEFAULT_RULES, (8, 128), ("heads", "ffw")) == PartitionSpec("tp", None)
    rules = DEFAULT_RULES.replace(batch="dp")
    assert logical_to_spec(TP4, rules, (8, 8), ("batch", "heads")) == PartitionSpec(None, "tp")
    assert logical_to_spec({"dp": 2, "tp": 4}, rules, (8, 8), ("batch", "heads")) == PartitionSpec("dp", "tp")
    with pytest.raises(ValueError, match="rank"):
        logical_to_spec(TP4, DEFAULT_RULES, (8,), ("heads", "ffw"))


def test_rules_replace_and_multi_axis_mapping():
    rules = ShardingRules((("heads", ("dp", "tp")),))
    assert logical_to_spec({"dp": 2, "tp": 2}, rules, (8,), ("heads",)) == PartitionSpec(("dp", "tp"))
    assert logical_to_spec({"dp": 2, "tp": 4}, rules, (4,), ("heads",)) == PartitionSpec("dp")
    assert DEFAULT_RULES.replace(vocab=None).mesh_axes("vocab") == ()


def test_make_mesh_uses_auto_axes_and_checks_device_count():
    mesh = make_mesh(1)
    assert mesh.axis_names == ("tp",) and dict(mesh.shape) == {"tp": 1}
    assert all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types)
    with pytest.raises(ValueError):
        make_mesh(len(jax.devices()) + 1)


def test_abstract_params_of_a_real_model_shape_shard_heads_not_kv_heads_on_16_way():
    cfg = parse_hf_config({"architectures": ["LlamaForCausalLM"], "vocab_size": 128256, "hidden_size": 4096,
                           "intermediate_size": 14336, "num_hidden_layers": 2, "num_attention_heads": 32,
                           "num_key_value_heads": 8}, {})
    specs = llama.param_specs(cfg, "bfloat16")
    spec_of = lambda s: logical_to_spec({"tp": 16}, DEFAULT_RULES, s.shape, s.axes)  # noqa: E731
    attn = map_specs(spec_of, specs.layers[0].attn)
    assert attn.q == PartitionSpec(None, "tp", None) and attn.k == PartitionSpec(None, None, None)
    assert spec_of(specs.layers[0].mlp.down) == PartitionSpec("tp", None)
    assert spec_of(kv_cache_specs(cfg, 100, 16, "bfloat16").k[0]) == PartitionSpec(None, None, None, None)
    abstract = abstract_params(specs, make_mesh(1), DEFAULT_RULES)
    assert abstract.embed.shape == (128256, 4096) and abstract.embed.sharding is not None
