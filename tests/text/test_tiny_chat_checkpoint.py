"""checkpoints/tiny-chat is a small, complete HF Llama checkpoint with a ChatML tokenizer."""

from __future__ import annotations

import json
import os
import struct

from text_fixtures import TINY_CHAT_DIR, load_ours


def _json(name: str) -> dict:
    with open(os.path.join(TINY_CHAT_DIR, name), encoding="utf-8") as f:
        return json.load(f)


def _safetensors_header(path: str) -> dict:
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(length))


def test_checkpoint_is_commit_sized():
    total = sum(os.path.getsize(os.path.join(TINY_CHAT_DIR, f)) for f in os.listdir(TINY_CHAT_DIR))
    assert total < 6_000_000


def test_config_describes_a_small_gqa_llama_matching_the_tokenizer():
    config = _json("config.json")
    tok = load_ours(TINY_CHAT_DIR)
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["vocab_size"] == tok.vocab_size
    assert config["hidden_size"] == config["num_attention_heads"] * config["head_dim"]
    assert config["num_attention_heads"] > config["num_key_value_heads"] > 0  # grouped-query attention
    assert config["tie_word_embeddings"] is False
    assert config["rope_theta"] == config["rope_parameters"]["rope_theta"]


def test_weights_are_bf16_with_an_untied_lm_head():
    header = _safetensors_header(os.path.join(TINY_CHAT_DIR, "model.safetensors"))
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    config = _json("config.json")
    assert {v["dtype"] for v in tensors.values()} == {"BF16"}
    assert tensors["lm_head.weight"]["shape"] == [config["vocab_size"], config["hidden_size"]]
    assert tensors["model.embed_tokens.weight"]["shape"] == [config["vocab_size"], config["hidden_size"]]
    layers = {int(k.split(".")[2]) for k in tensors if k.startswith("model.layers.")}
    assert layers == set(range(config["num_hidden_layers"]))


def test_chatml_special_tokens_end_generation():
    tok = load_ours(TINY_CHAT_DIR)
    im_end, eot = tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")
    assert tok.token_to_id("<|im_start|>") is not None
    assert tok.eos_token == "<|im_end|>" and tok.bos_token is None
    assert set(_json("generation_config.json")["eos_token_id"]) == {im_end, eot}
    assert set(_json("config.json")["eos_token_id"]) == {im_end, eot}
    assert tok.eos_token_ids == (im_end, eot)
    assert set(tok.all_special_ids) == {tok.token_to_id("<|im_start|>"), im_end, eot}
    assert tok.encode("<|im_start|>user\nhi<|im_end|>")[0] == tok.token_to_id("<|im_start|>")


def test_trained_model_answers_a_chat_prompt_and_ends_its_turn():
    """The default checkpoint is briefly trained, so demos show word-like text and a real EOS."""
    import torch
    from transformers import AutoModelForCausalLM

    tok = load_ours(TINY_CHAT_DIR)
    model = AutoModelForCausalLM.from_pretrained(TINY_CHAT_DIR, dtype=torch.float32)
    prompt = tok.encode_chat([{"role": "user", "content": "What is lambda?"}])
    out = model.generate(torch.tensor([prompt]), max_new_tokens=200, do_sample=False)[0, len(prompt) :].tolist()
    assert out[-1] in tok.eos_token_ids
    words = tok.decode(out).split()
    assert len(words) >= 5 and sum(w.strip('.,:;()"*').isalpha() for w in words) >= 0.6 * len(words)
