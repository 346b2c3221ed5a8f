"""MoE models with quantized weights (load-time conversion) equal the same model on the dequantized weights."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from moe_cases import CASES, MoECase, build_case
from paged_runner import PagedRunner

from dgjax import sharding
from dgjax.checkpoint.convert import convert_params, parse_quantize
from dgjax.checkpoint.hf_names import hf_sources
from dgjax.models.registry import get_family
from dgjax.quant import QuantizedWeight, is_quantized


@pytest.fixture(scope="module", params=sorted(CASES))
def moe_case(request, tmp_path_factory) -> MoECase:
    return build_case(request.param, tmp_path_factory.mktemp(request.param))


@pytest.mark.parametrize("mode", ["fp8", "nvfp4-experts"])
def test_quantized_moe_equals_dequantized_weights(moe_case, mode):
    cfg, mesh, rules = moe_case.cfg, moe_case.mesh, sharding.DEFAULT_RULES
    specs = get_family(cfg).param_specs(cfg, "float32")
    quantized = convert_params(moe_case.params, hf_sources(cfg), specs, parse_quantize(mode), mesh, rules)
    leaves = jax.tree_util.tree_leaves(quantized, is_leaf=is_quantized)
    expert_nodes = [x for x in leaves if is_quantized(x) and x.expert_dims == 1]
    assert expert_nodes, "no expert stack was quantized"
    dense = jax.tree_util.tree_map(lambda x: x.dequantize() if isinstance(x, QuantizedWeight) else x,
                                   quantized, is_leaf=is_quantized)
    tokens = moe_case.hf_tokens
    got = PagedRunner(cfg, quantized, mesh).prefill("seq", tokens)
    want = PagedRunner(cfg, dense, mesh).prefill("seq", tokens)
    np.testing.assert_allclose(got, want, atol=2e-4, rtol=0)
    # decode steps route one token (the gathered-experts path)
    prompt = tokens[:7]
    assert PagedRunner(cfg, quantized, mesh, seed=1).greedy("seq", prompt, 4) == \
        PagedRunner(cfg, dense, mesh, seed=1).greedy("seq", prompt, 4)
    # and the quantization did change the model (the comparison is not vacuous)
    original = PagedRunner(cfg, moe_case.params, mesh).prefill("seq", tokens)
    assert np.max(np.abs(original - want)) > 1e-3
