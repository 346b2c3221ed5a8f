"""What the dense and MoE parity cases share: the prompt, the HF reference (greedy and teacher-forced
log-probs) and the perturbation that makes a missing norm or bias visible."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from dgjax.checkpoint.loader import load_params
from dgjax.config import ModelConfig
from dgjax.sharding import DEFAULT_RULES, make_mesh

PROMPT = [5, 17, 99, 3, 64, 23, 8]
NEW_TOKENS = 6


@dataclasses.dataclass
class HFCase:
    name: str
    hf_model: torch.nn.Module
    cfg: ModelConfig
    params: object
    mesh: object
    hf_tokens: list[int]  # PROMPT + HF's greedy continuation
    hf_logprobs: np.ndarray  # HF teacher-forced log-probs over hf_tokens [L, V]

    def hf_greedy(self, prompt: list[int], n: int) -> list[int]:
        with torch.no_grad():
            out = self.hf_model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False)
        return out[0, len(prompt):].tolist()


def randomize_vectors(model: torch.nn.Module) -> None:
    """HF inits norms to 1, biases (and a MoE router's score correction, a buffer) to 0, which would hide a
    missing one: perturb them."""
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if p.ndim == 1 and ("norm" in name or "bias" in name):
                p.copy_((1.0 if "norm" in name else 0.0) + 0.3 * torch.randn_like(p))


def load_case(cls: type[HFCase], name: str, model: torch.nn.Module, checkpoint, **extra) -> HFCase:
    """Load the saved `checkpoint` folder with dgjax and record HF's reference outputs."""
    cfg = ModelConfig.from_dir(str(checkpoint))
    mesh = make_mesh(1)
    params = load_params(str(checkpoint), cfg, "float32", mesh, DEFAULT_RULES)
    case = cls(name, model, cfg, params, mesh, [], np.zeros(0), **extra)
    case.hf_tokens = PROMPT + case.hf_greedy(PROMPT, NEW_TOKENS)
    with torch.no_grad():
        logits = model(torch.tensor([case.hf_tokens])).logits[0]
    case.hf_logprobs = torch.log_softmax(logits.float(), -1).numpy()
    return case
