"""The real engine serving a tiny random Qwen3-MoE checkpoint gives transformers' greedy tokens."""

from __future__ import annotations

import shutil

import torch
import transformers

from dgjax.llm import LLM
from dgjax.runtime.types import SamplingParams

from engine_harness import MODEL_DIR, small_engine_config

NEW_TOKENS = 8
PROMPTS = [[5, 17, 99, 3, 64, 23, 8, 1500, 42, 7, 300],
           [1900, 4, 77, 2000, 13, 13, 250, 91, 600, 5, 8, 31, 1024, 2, 64, 99, 100, 7, 3, 1111]]  # > one chunk


def test_engine_greedy_tokens_match_transformers_on_tiny_qwen3_moe(tmp_path):
    torch.manual_seed(0)
    hf_cfg = transformers.Qwen3MoeConfig(
        vocab_size=2048, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=True, max_position_embeddings=128, initializer_range=0.2,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    model = transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.float32).eval()
    model.save_pretrained(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(f"{MODEL_DIR}/{name}", tmp_path / name)
    expected = []
    with torch.no_grad():
        for p in PROMPTS:
            out = model.generate(torch.tensor([p]), max_new_tokens=NEW_TOKENS, do_sample=False)
            expected.append(out[0, len(p):].tolist())

    config = small_engine_config(max_model_len=64, max_concurrency=2, decode_buckets=(2,), prefill_buckets=(16,),
                                 aot_logprob_variants=False)
    with LLM(str(tmp_path), config) as llm:
        outs = llm.generate(PROMPTS, SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True))
    assert [o.token_ids for o in outs] == expected
