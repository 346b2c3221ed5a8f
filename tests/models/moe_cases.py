"""Tiny random HF MoE models (Qwen3-MoE, GLM-4.5 style), saved with safetensors and loaded with dgjax.

The GLM checkpoint also gets an MTP layer (`model.layers.{num_hidden_layers}.*`), written the way the
public GLM-4.5 checkpoints store it, which transformers neither creates nor reads.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
import transformers

from hf_cases import NEW_TOKENS, PROMPT, HFCase, load_case, randomize_vectors  # noqa: F401 (re-exported)

from dgjax.checkpoint.safetensors_io import SafetensorsFolder, write_safetensors

TINY = dict(
    vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3,
    num_attention_heads=4, num_key_value_heads=2, num_experts_per_tok=2, max_position_embeddings=64,
    initializer_range=0.1, bos_token_id=None, eos_token_id=None, pad_token_id=None,
)

# name -> (transformers config class, overrides, MTP layers to add to the checkpoint)
CASES = {
    "qwen3_moe_dense_layer0_renorm": (transformers.Qwen3MoeConfig, dict(
        num_experts=8, head_dim=24, norm_topk_prob=True, mlp_only_layers=[0], initializer_range=0.2), 0),
    "glm4_moe_grouped_shared_mtp": (transformers.Glm4MoeConfig, dict(
        n_routed_experts=8, n_group=2, topk_group=1, n_shared_experts=1, first_k_dense_replace=1,
        routed_scaling_factor=2.5, norm_topk_prob=True, use_qk_norm=True, attention_bias=True,
        head_dim=16, rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5),
        num_nextn_predict_layers=1), 1),
    # glm-4.5-air's routing: sigmoid scores with the correction bias, no group limit (the one-kernel selection
    # is the GPU default for it)
    "glm4_moe_air_routing": (transformers.Glm4MoeConfig, dict(
        n_routed_experts=8, n_group=1, topk_group=1, n_shared_experts=1, first_k_dense_replace=1,
        routed_scaling_factor=2.5, norm_topk_prob=True, attention_bias=True, head_dim=16,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5),
        num_nextn_predict_layers=0), 0),
}


@dataclasses.dataclass
class MoECase(HFCase):
    path: object = None
    mtp_tensors: dict = dataclasses.field(default_factory=dict)  # MTP tensors written into the checkpoint


def _add_mtp_layers(path, hf_cfg, n_mtp: int) -> dict:
    """Rewrite the checkpoint with random MTP layers: a copy-shaped decoder layer (the last one, a MoE
    layer) plus eh_proj / enorm / hnorm / shared_head, and the embed/head copies GLM-4.5 stores."""
    folder = SafetensorsFolder(str(path))
    tensors = {k: np.array(folder[k]) for k in folder}
    last, h = hf_cfg.num_hidden_layers - 1, hf_cfg.hidden_size
    rng = np.random.default_rng(1)
    added = {}
    for i in range(n_mtp):
        layer = hf_cfg.num_hidden_layers + i
        for k, t in tensors.items():
            if k.startswith(f"model.layers.{last}."):
                added[k.replace(f"layers.{last}.", f"layers.{layer}.")] = rng.normal(size=t.shape).astype(t.dtype)
        pre = f"model.layers.{layer}"
        added[f"{pre}.eh_proj.weight"] = rng.normal(size=(h, 2 * h)).astype(np.float32)
        for norm in ("enorm", "hnorm", "shared_head.norm"):
            added[f"{pre}.{norm}.weight"] = rng.normal(size=(h,)).astype(np.float32)
        added[f"{pre}.embed_tokens.weight"] = tensors["model.embed_tokens.weight"]
        added[f"{pre}.shared_head.head.weight"] = tensors["lm_head.weight"]
    write_safetensors(str(path / "model.safetensors"), {**tensors, **added})
    return added


def build_case(name: str, path) -> MoECase:
    """Create, randomize and save the HF model `name`, then load it with dgjax."""
    config_cls, overrides, n_mtp = CASES[name]
    torch.manual_seed(0)
    hf_cfg = config_cls(**{**TINY, **overrides})
    model = transformers.AutoModelForCausalLM.from_config(hf_cfg, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    randomize_vectors(model)
    model.save_pretrained(path)
    mtp = _add_mtp_layers(path, hf_cfg, n_mtp) if n_mtp else {}
    return load_case(MoECase, name, model, path, path=path, mtp_tensors=mtp)


def fresh_trace_logits(case: MoECase, monkeypatch) -> tuple[list, object]:
    """Logits of two 16-wide prefill chunks and of batched decode steps (a padding row in the middle),
    from a freshly traced step: kernel choices read their environment variables at trace time, and jit
    caches a trace per Python function. Returns (logits, the jitted step)."""
    import jax
    import paged_runner
    from paged_runner import PagedRunner

    forward = paged_runner.step_logits.__wrapped__
    step = jax.jit(lambda params, kv, batch, cfg: forward(params, kv, batch, cfg), static_argnames=("cfg",))
    monkeypatch.setattr(paged_runner, "step_logits", step)
    runner = PagedRunner(case.cfg, case.params, case.mesh, seed=1)
    logits = [runner.step([("a", PROMPT)], 16)[0], runner.step([("b", [9, 40, 2, 77])], 16)[0]]
    last = {"a": logits[0][-1], "b": logits[1][-1]}
    for _ in range(NEW_TOKENS // 2):
        out = runner.step([("a", [int(np.argmax(last["a"]))]), None, ("b", [int(np.argmax(last["b"]))])], 1)
        logits += [out[0], out[2]]
        last = {"a": out[0][-1], "b": out[2][-1]}
    return logits, (step, runner)
