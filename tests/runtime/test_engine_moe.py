"""The real engine serving a tiny random Qwen3-MoE checkpoint gives transformers' greedy tokens."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import torch
import transformers

from dgjax.llm import LLM
from dgjax.runtime.types import SamplingParams

from engine_harness import MODEL_DIR, small_engine_config

NEW_TOKENS = 8
PROMPTS = [[5, 17, 99, 3, 64, 23, 8, 1500, 42, 7, 300],
           [1900, 4, 77, 2000, 13, 13, 250, 91, 600, 5, 8, 31, 1024, 2, 64, 99, 100, 7, 3, 1111]]  # > one chunk


def _write_tiny_qwen3_moe(path) -> transformers.PreTrainedModel:
    torch.manual_seed(0)
    hf_cfg = transformers.Qwen3MoeConfig(
        vocab_size=2048, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=True, max_position_embeddings=128, initializer_range=0.2,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    model = transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.float32).eval()
    model.save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(f"{MODEL_DIR}/{name}", path / name)
    return model


def test_engine_greedy_tokens_match_transformers_on_tiny_qwen3_moe(tmp_path):
    model = _write_tiny_qwen3_moe(tmp_path)
    expected = []
    with torch.no_grad():
        for p in PROMPTS:
            out = model.generate(torch.tensor([p]), max_new_tokens=NEW_TOKENS, do_sample=False)
            expected.append(out[0, len(p):].tolist())

    config = small_engine_config(max_model_len=64, max_concurrency=2, decode_buckets=(2,), prefill_buckets=(16,),
                                 aot_logprob_variants=False)
    with LLM(str(tmp_path), config) as llm:
        outs = llm.generate(PROMPTS, SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True))
        assert llm.engine._loaded.executor.pdl_mode == "off"  # routed experts: no early PDL triggers
    assert [o.token_ids for o in outs] == expected


EP_SCRIPT = r"""
import json, sys
import jax
sys.path.insert(0, sys.argv[1])
from dgjax.llm import LLM
from dgjax.runtime.types import SamplingParams
from engine_harness import small_engine_config
prompts = json.loads(sys.argv[3])
out = {}
for name, tp, ep in (("single", 1, False), ("expert_parallel", 2, True), ("tensor_parallel", 2, False)):
    llm = LLM(sys.argv[2], small_engine_config(tensor_parallel=tp, expert_parallel=ep, max_model_len=64,
              max_concurrency=2, decode_buckets=(2,), prefill_buckets=(16,), aot_logprob_variants=False))
    outs = llm.generate(prompts, SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))
    gate = llm.engine._loaded.params.layers[0].ffn.experts.gate
    out[name] = {"tokens": [o.token_ids for o in outs], "gate_spec": str(gate.sharding.spec)}
    llm.close()
print(json.dumps(out))
"""


def test_expert_parallel_engine_places_whole_experts_and_matches_one_device(tmp_path):
    """--enable-expert-parallel on 2 fake devices: experts split across devices, same greedy tokens."""
    _write_tiny_qwen3_moe(tmp_path)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", EP_SCRIPT, here, str(tmp_path), json.dumps(PROMPTS)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["expert_parallel"]["tokens"] == out["single"]["tokens"] == out["tensor_parallel"]["tokens"]
    # gate [experts, embed, ffw]: whole experts per device, else each expert's ffw split
    assert out["expert_parallel"]["gate_spec"].replace("PartitionSpec", "P") == "P('tp', None, None)"
    assert out["tensor_parallel"]["gate_spec"].replace("PartitionSpec", "P") == "P(None, None, 'tp')"
