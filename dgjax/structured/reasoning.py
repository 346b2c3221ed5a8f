"""Let a reasoning model think before its constrained answer.

Qwen3 and DeepSeek-R1-style models write `<think> ... </think>` before the answer, or the chat
template already opened `<think>` in the prompt. A JSON or tool-call grammar applied from the first
token would forbid the thought (and, when the prompt opened it, the reasoning parser would then read
the whole answer as reasoning). So the answer grammar is wrapped: free text up to the end marker
(required when the prompt opened the block, optional otherwise, then it must start with the start
marker), a little whitespace, then the answer. The thought itself is not constrained, as in vLLM.
"""

from __future__ import annotations

import json

from llguidance import LLMatcher

__all__ = ["after_reasoning"]

_ANSWER = "answer_after_reasoning"


def _marker(text: str, special_ids: dict[str, int]) -> str:
    return f"<[{special_ids[text]}]>" if text in special_ids else json.dumps(text, ensure_ascii=False)


def after_reasoning(grammar: str, start: str, end: str, opened: bool,
                    special_ids: dict[str, int]) -> str:
    """`grammar` (an llguidance grammar, as the other builders return) preceded by reasoning.

    `opened`: the prompt ends inside the reasoning block. `special_ids`: markers that are single
    added tokens (name them by id; their text spelled out in pieces would not match).
    """
    # the builders return either llguidance's JSON grammar list or a bare Lark grammar
    inner = json.loads(grammar)["grammars"] if grammar.lstrip().startswith("{") else [{"lark_grammar": grammar}]
    if end in special_ids:  # a special token never occurs in text: no laziness needed
        thought = f"/(.|\\n)*/ {_marker(end, special_ids)}"
        rules = [f"thought: {thought}"]
    else:  # lazy: the thought ends at the first end marker
        rules = [f"thought[lazy]: /(.|\\n)*/ {_marker(end, special_ids)}"]
    head = "thought" if opened else f"({_marker(start, special_ids)} thought)?"
    lark = "\n".join(["%llguidance {}", f"start: {head} GAP? @{_ANSWER}", *rules,
                      "GAP: /[ \\t\\r\\n]{1,4}/"]) + "\n"
    main = {k: v for k, v in inner[0].items() if k != "name"}
    composed = {"grammars": [{"lark_grammar": lark}, {**main, "name": _ANSWER}, *inner[1:]]}
    text = json.dumps(composed, ensure_ascii=False)
    error = LLMatcher.validate_grammar(text)
    if error:
        raise ValueError(f"internal reasoning grammar error: {error}")
    return text
