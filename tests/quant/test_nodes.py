"""Quantized weight nodes: dense-layout geometry, expert selection, the reference matmul, array shardings."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AbstractMesh, PartitionSpec as P

from dgjax.models.ops import matmul
from dgjax.quant import Fp8BlockWeight, IntWeight, Mxfp4Weight, Nvfp4Weight, array_specs, reference_expert_matmul
from dgjax.quant import fp8_block, int_group, mxfp4, nvfp4
from dgjax.sharding import DEFAULT_RULES

RNG = np.random.default_rng(5)


def _node(kind: str, rows: np.ndarray, shape, in_dims: int, expert_dims: int = 0):
    """A node of `kind` from float32 rows [*E, N, K], with the dense shape it stands for."""
    geo = dict(shape=tuple(shape), in_dims=in_dims, expert_dims=expert_dims)
    if kind == "fp8":
        w, s = fp8_block.quantize_np(rows)
        return Fp8BlockWeight(weight=jnp.asarray(w), scale=jnp.asarray(s), **geo)
    if kind == "nvfp4":
        p, b, g = nvfp4.quantize_np(rows)
        return Nvfp4Weight(packed=jnp.asarray(p), block_scale=jnp.asarray(b), global_scale=jnp.asarray(g), **geo)
    if kind == "mxfp4":
        p, s = mxfp4.quantize_np(rows)
        return Mxfp4Weight(packed=jnp.asarray(p), scale=jnp.asarray(s), **geo)
    q, s, z = int_group.quantize_np(rows, 4, 16, symmetric=False)
    return IntWeight(values=jnp.asarray(int_group.values_from_q_np(q, 4)), scale=jnp.asarray(s), **geo,
                     bits=4, group_size=16, zero_point=jnp.asarray(z))


def _numpy_rows(node) -> np.ndarray:
    if isinstance(node, Fp8BlockWeight):
        return fp8_block.dequantize_np(np.asarray(node.weight), np.asarray(node.scale))
    if isinstance(node, Nvfp4Weight):
        return nvfp4.dequantize_np(np.asarray(node.packed), np.asarray(node.block_scale), np.asarray(node.global_scale))
    if isinstance(node, Mxfp4Weight):
        return mxfp4.dequantize_np(np.asarray(node.packed), np.asarray(node.scale))
    q = int_group.q_from_values_np(np.asarray(node.values), node.bits)
    return int_group.dequantize_np(q, np.asarray(node.scale), np.asarray(node.zero_point), node.group_size)


KINDS = ["fp8", "nvfp4", "mxfp4", "int4"]


@pytest.mark.parametrize("kind", KINDS)
def test_dequantize_gives_the_input_major_dense_layout(kind):
    # q-like [embed, heads, head_dim] (one input dim) and o-like [heads, head_dim, embed] (two input dims).
    for shape, in_dims in (((64, 4, 8), 1), ((4, 8, 64), 2)):
        k = int(np.prod(shape[:in_dims]))
        n = int(np.prod(shape[in_dims:]))
        node = _node(kind, RNG.standard_normal((n, k)).astype(np.float32), shape, in_dims)
        assert node.n == n and node.k == k and node.in_shape == shape[:in_dims] and node.out_shape == shape[in_dims:]
        rows = _numpy_rows(node)  # [N, K] with N row-major over the out dims
        expected = np.moveaxis(rows.reshape(shape[in_dims:] + shape[:in_dims]), range(len(shape) - in_dims),
                               range(in_dims, len(shape)))
        np.testing.assert_array_equal(np.asarray(node.dequantize()), expected)
        x = RNG.standard_normal((3, 5) + shape[:in_dims]).astype(np.float32)
        got = matmul(jnp.asarray(x), node, contract=in_dims)
        want = matmul(jnp.asarray(x), jnp.asarray(expected), contract=in_dims)
        assert got.shape == (3, 5) + shape[in_dims:]
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_take_experts_selects_whole_experts(kind):
    rows = RNG.standard_normal((4, 32, 64)).astype(np.float32)
    node = _node(kind, rows, (4, 64, 32), 1, expert_dims=1)
    dense = np.asarray(node.dequantize())
    taken = node.take_experts(jnp.asarray([3, 0, 3]))
    assert taken.shape == (3, 64, 32) and taken.lead_shape == (3,)
    np.testing.assert_array_equal(np.asarray(taken.dequantize()), dense[[3, 0, 3]])
    with pytest.raises(ValueError, match="expert"):
        matmul(jnp.ones((2, 64)), node)


def test_node_is_a_pytree_of_its_packed_arrays_with_static_geometry():
    node = _node("nvfp4", RNG.standard_normal((32, 64)).astype(np.float32), (64, 32), 1)
    leaves, treedef = jax.tree_util.tree_flatten(node)
    assert [x.dtype for x in leaves] == [jnp.uint8, jnp.float8_e4m3fn, jnp.float32]
    abstract = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), node)
    assert abstract.shape == (64, 32) and abstract.packed.shape == (32, 32)
    out = jax.jit(lambda w, x: matmul(x, w))(node, jnp.ones((1, 64)))
    assert out.shape == (1, 32) and node.nbytes == 32 * 32 + 32 * 4 + 4


MESH = AbstractMesh((4,), ("tp",))


def _specs(cls, shape, axes, in_dims, expert_dims=0, rules=DEFAULT_RULES, **static):
    return array_specs(cls, shape, axes, in_dims, expert_dims, MESH, rules, **static)


def test_scales_shard_with_their_rows_when_whole_blocks_fit():
    q = ("embed", "heads", "head_dim")
    assert _specs(Fp8BlockWeight, (256, 8, 64), q, 1) == {"weight": P("tp", None), "scale": P("tp", None)}
    # 4 heads x 48 = 192 rows: 48 a device, not whole 128-row tiles -> every array replicated on N.
    assert _specs(Fp8BlockWeight, (256, 4, 48), q, 1) == {"weight": P(None, None), "scale": P(None, None)}
    o = ("heads", "head_dim", "embed")  # row-parallel: inputs split
    assert _specs(Fp8BlockWeight, (8, 64, 256), o, 2) == {"weight": P(None, "tp"), "scale": P(None, "tp")}
    up = ("embed", "ffw")
    assert _specs(Nvfp4Weight, (256, 512), up, 1) == {
        "packed": P("tp", None), "block_scale": P("tp", None), "global_scale": P()}
    assert _specs(Nvfp4Weight, (512, 256), ("ffw", "embed"), 1, has_input_scale=True) == {
        "packed": P(None, "tp"), "block_scale": P(None, "tp"), "global_scale": P(), "input_scale": P()}
    assert _specs(Mxfp4Weight, (256, 512), up, 1)["scale"] == P("tp", None)
    # int4 group 128 down_proj: 384 inputs / 4 = 96 a device, not a whole group -> replicated.
    assert _specs(IntWeight, (384, 256), ("ffw", "embed"), 1, group_size=128)["values"] == P(None, None)
    assert _specs(IntWeight, (512, 256), ("ffw", "embed"), 1, group_size=128, asymmetric=True) == {
        "values": P(None, "tp"), "scale": P(None, "tp"), "zero_point": P(None, "tp")}


def test_expert_axis_shards_every_array_including_per_expert_scalars():
    rules = DEFAULT_RULES.replace(experts="tp", ffw=None)
    specs = _specs(Nvfp4Weight, (8, 256, 512), ("experts", "embed", "ffw"), 1, expert_dims=1, rules=rules)
    assert specs == {"packed": P("tp", None, None), "block_scale": P("tp", None, None), "global_scale": P("tp")}


def test_expert_matmul_reference_gathers_or_ragged_dots_the_dequantized_experts():
    rows = RNG.standard_normal((4, 32, 64)).astype(np.float32)  # E=4 experts [N=32 out, K=64 in]
    node = _node("fp8", rows, (4, 64, 32), 1, expert_dims=1)
    dense = np.asarray(node.dequantize())  # [E, in, out]
    x = jnp.asarray(RNG.standard_normal((6, 64)).astype(np.float32))
    ids = jnp.asarray([2, 0, 2, 3, 1, 1])
    want = np.einsum("mi,mio->mo", np.asarray(x), dense[np.asarray(ids)])
    np.testing.assert_allclose(np.asarray(reference_expert_matmul(x, node, expert_ids=ids)), want, rtol=1e-5, atol=1e-5)
    sizes = jnp.asarray([2, 1, 0, 3])  # rows already sorted by expert
    ragged = jax.lax.ragged_dot(x, jnp.asarray(dense), sizes)
    got = reference_expert_matmul(x, node, group_sizes=sizes)
    np.testing.assert_allclose(np.asarray(got), np.asarray(ragged), rtol=1e-5, atol=1e-5)
