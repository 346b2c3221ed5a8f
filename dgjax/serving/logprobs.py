"""Render engine logprobs in OpenAI's two formats (chat `content[]` and legacy completions arrays)."""

from __future__ import annotations

import functools
import math
from typing import Any

from dgjax.runtime.types import TokenLogprob

# JSON has no -inf; vLLM reports impossible tokens as -9999.0, which clients already handle.
_FLOOR = -9999.0


def clean_logprob(value: float) -> float:
    if math.isnan(value) or value < _FLOOR:
        return _FLOOR
    return float(value)


class TokenRenderer:
    """Token id -> (display string, exact bytes), cached; or "token_id:N" when the client asks."""

    def __init__(self, tokenizer, as_token_ids: bool = False) -> None:
        self.tokenizer = tokenizer
        self.as_token_ids = as_token_ids

    def text(self, token_id: int) -> str:
        if self.as_token_ids:
            return f"token_id:{token_id}"
        return _decode_one(self.tokenizer, token_id)[0]

    def bytes(self, token_id: int) -> list[int]:
        if self.as_token_ids:
            return list(f"token_id:{token_id}".encode())
        return list(_decode_one(self.tokenizer, token_id)[1])


@functools.lru_cache(maxsize=1 << 16)
def _decode_one(tokenizer, token_id: int) -> tuple[str, bytes]:
    """A token's display text (a lone fragment of a UTF-8 character shows as U+FFFD) and the exact
    bytes it stands for."""
    try:
        return tokenizer.decode([token_id], skip_special_tokens=False), tokenizer.token_bytes(token_id)
    except (KeyError, OverflowError):  # an embedding row past the tokenizer's vocabulary
        return "", b""


def chat_logprobs(entries: list[TokenLogprob], r: TokenRenderer, top: int) -> list[dict[str, Any]]:
    """OpenAI chat `logprobs.content`: token, logprob, bytes, top_logprobs (exactly `top` items)."""
    out = []
    for e in entries:
        out.append({
            "token": r.text(e.token_id),
            "logprob": clean_logprob(e.logprob),
            "bytes": r.bytes(e.token_id),
            "top_logprobs": [{"token": r.text(t), "logprob": clean_logprob(lp),
                              "bytes": r.bytes(t)} for t, lp in e.top[:top]],
        })
    return out


class CompletionLogprobs:
    """Legacy completions `logprobs` object, built incrementally so streams keep text offsets."""

    def __init__(self, r: TokenRenderer, top: int, text_offset: int = 0) -> None:
        self.r = r
        self.top = top
        self.offset = text_offset

    def render(self, entries: list[TokenLogprob | None],
               token_ids: list[int] | None = None) -> dict[str, Any]:
        """`token_ids` gives the ids for entries that are None (the first prompt token)."""
        tokens, token_logprobs, top_logprobs, offsets = [], [], [], []
        for k, e in enumerate(entries):
            token_id = e.token_id if e is not None else token_ids[k]
            text = self.r.text(token_id)
            tokens.append(text)
            offsets.append(self.offset)
            self.offset += len(text)
            if e is None:
                token_logprobs.append(None)
                top_logprobs.append(None)
                continue
            token_logprobs.append(clean_logprob(e.logprob))
            alts = {self.r.text(t): clean_logprob(lp) for t, lp in e.top[:self.top]}
            alts.setdefault(text, clean_logprob(e.logprob))
            top_logprobs.append(alts)
        return {"tokens": tokens, "token_logprobs": token_logprobs,
                "top_logprobs": top_logprobs, "text_offset": offsets}


def merge_completion_logprobs(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    if a is None:
        return b
    return {k: a[k] + b[k] for k in a}
