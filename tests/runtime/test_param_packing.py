"""Norm vectors packed into one array per kind for the step calls: fewer arguments, the same parameters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from dgjax.models import llama
from dgjax.models.hf_config import parse_hf_config
from dgjax.models.params import init_params
from dgjax.runtime import param_packing
from dgjax.sharding import DEFAULT_RULES, make_mesh

CFG = parse_hf_config({"architectures": ["LlamaForCausalLM"], "vocab_size": 64, "hidden_size": 32,
                       "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4,
                       "num_key_value_heads": 2}, {})


def _params(mesh):
    params = init_params(llama.param_specs(CFG), jax.random.key(0), mesh, DEFAULT_RULES)
    rng = np.random.default_rng(0)  # norms start as ones: make each layer's vectors distinct
    like = lambda a: jax.device_put(jnp.asarray(rng.standard_normal(32), a.dtype), a.sharding)  # noqa: E731
    layers = tuple(layer.replace(input_norm=like(layer.input_norm), post_attention_norm=like(layer.post_attention_norm))
                   for layer in params.layers)
    return params.replace(layers=layers)


def test_pack_removes_two_arrays_per_layer_and_unpack_restores_every_parameter():
    params = _params(make_mesh(1))
    packed = param_packing.pack(params)
    n = CFG.num_hidden_layers
    assert len(jax.tree.leaves(packed)) == len(jax.tree.leaves(params)) - 2 * n + 2
    assert packed.stacks["input_norm"].shape == (n, 32)
    from dgjax.pallas import stacked

    def values(p):  # StackedRows (input_norm) resolved to their rows
        return jax.tree.map(stacked.value, param_packing.unpack(p), is_leaf=lambda x: isinstance(x, stacked.StackedRow))

    unpacked = param_packing.unpack(packed)
    assert isinstance(unpacked.layers[1].input_norm, stacked.StackedRow) and unpacked.layers[1].input_norm.index == 1
    restored = jax.jit(values)(packed)
    assert jax.tree.structure(restored) == jax.tree.structure(params)
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(params)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_stacks_keep_the_vectors_sharding_with_a_leading_layer_axis():
    mesh = make_mesh(1)
    params = _params(mesh)
    packed = param_packing.pack(params)
    sharding = params.layers[0].input_norm.sharding
    assert isinstance(sharding, NamedSharding)
    assert packed.stacks["input_norm"].sharding == NamedSharding(mesh, PartitionSpec(None, *sharding.spec))


def test_steps_take_packed_params_and_compute_the_same():
    params = _params(make_mesh(1))
    from dgjax.pallas.stacked import value

    step = lambda p, x: sum(jnp.sum(value(layer.input_norm) * x) + jnp.sum(value(layer.post_attention_norm))  # noqa: E731
                            for layer in p.layers)
    x = jnp.arange(32, dtype=jnp.float32)
    got = jax.jit(param_packing.taking_packed(step))(param_packing.pack(params), x)
    np.testing.assert_allclose(float(got), float(step(params, x)), rtol=1e-5)


def test_packed_steps_keep_the_step_name_in_compiled_modules():
    import functools

    def decode_tick(p, x, *, k):
        from dgjax.pallas.stacked import value

        return jnp.sum(value(p.layers[0].post_attention_norm)) * x * k

    fn = param_packing.taking_packed(functools.partial(decode_tick, k=2.0))
    lowered = jax.jit(fn).lower(param_packing.pack(_params(make_mesh(1))), jnp.float32(1.0))
    assert "jit_decode_tick" in lowered.as_text()


def test_qwen3_head_norms_are_packed_and_come_back_as_stacked_rows():
    from dgjax.pallas.stacked import StackedRow

    cfg = parse_hf_config({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 64, "hidden_size": 32,
                           "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "head_dim": 16}, {})
    params = init_params(llama.param_specs(cfg), jax.random.key(1), make_mesh(1), DEFAULT_RULES)
    packed = param_packing.pack(params)
    assert len(jax.tree.leaves(packed)) == len(jax.tree.leaves(params)) - 4 * 3 + 4
    assert packed.params.layers[1].attn.q_norm is None and packed.stacks["attn.k_norm"].shape == (3, 16)
    layer = param_packing.unpack(packed).layers[2]
    assert isinstance(layer.attn.q_norm, StackedRow) and layer.attn.q_norm.index == 2
    np.testing.assert_array_equal(np.asarray(layer.attn.k_norm.value()), np.asarray(params.layers[2].attn.k_norm))
