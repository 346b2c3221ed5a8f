"""A constrained answer after free reasoning: `<think>` as text (Qwen tokenizer package) and as an
added token (DeepSeek), with the block opened by the prompt or by the model, or skipped."""

from __future__ import annotations

import json

import pytest
from structured_fixtures import continue_generation, tiny_lm, tokenizer_and_backend, validator

from dgjax.structured.json_schema import schema_grammar
from dgjax.structured.reasoning import after_reasoning

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                           "n": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["ok", "n"]}


def _matcher_after(backend, tok, grammar: str, prefix: str):
    matcher = backend.matcher(grammar)
    ids = tok.encode(prefix, add_special_tokens=False)
    consumed = matcher.try_consume_tokens(ids)
    return matcher, consumed == len(ids)


@pytest.mark.parametrize("tokenizer", ["qwen", "deepseek"])
@pytest.mark.parametrize("opened", [False, True], ids=["model-opens", "prompt-opened"])
def test_answer_after_reasoning_is_valid(tokenizer, opened):
    tok, backend = tokenizer_and_backend(tokenizer)
    special = backend.special_token_ids(("<think>", "</think>"))
    assert bool(special) == (tokenizer == "deepseek")
    grammar = after_reasoning(schema_grammar(SCHEMA, True), "<think>", "</think>", opened, special)
    thought = ("" if opened else "<think>\n") + 'Maybe {"ok": "no"} - let me see.\n</think>\n\n'
    for seed in range(4):
        matcher, ok = _matcher_after(backend, tok, grammar, thought)
        assert ok
        ids, ended = continue_generation(backend, matcher, tiny_lm(backend.vocab_size, seed % 4),
                                         seed)
        assert ended
        assert validator(SCHEMA).is_valid(json.loads(tok.decode(ids, skip_special_tokens=False)))
    # the answer itself is constrained right after the thought, and a thought must be closed
    assert not _matcher_after(backend, tok, grammar, thought + "Sure!")[1]
    matcher, consumed = _matcher_after(backend, tok, grammar, '{"ok": true, "n": 1}')
    assert (consumed and matcher.is_accepting()) == (not opened)  # opened: still thinking


@pytest.mark.parametrize("opened", [False, True], ids=["model-opens", "prompt-opened"])
def test_bare_lark_answer_grammar_after_reasoning(opened):
    """Tool-call grammars come back as bare Lark (not llguidance's JSON list); they compose the same way
    (tool_choice "required" on a thinking model once answered 500 here)."""
    from llguidance import LLMatcher

    tok, backend = tokenizer_and_backend("qwen")
    grammar = after_reasoning(LLMatcher.grammar_from_lark('start: "yes" | "no"'), "<think>", "</think>",
                              opened, {})
    thought = ("" if opened else "<think>\n") + "hmm\n</think>\n"
    matcher, ok = _matcher_after(backend, tok, grammar, thought + "no")
    assert ok and matcher.is_accepting()
    assert not _matcher_after(backend, tok, grammar, thought + "maybe")[1]
