"""One model's llguidance state: its token trie, compiled grammars, and per-request matchers.

The engine owns one `GrammarBackend`. Building the `LLTokenizer` (the trie llguidance walks to
compute masks) takes about a second for a 150k vocabulary, so it is built once, lazily. Compiling a
grammar can take from a millisecond to far longer for large schemas, so compiled matchers are
cached by grammar text and each request gets a `deep_copy` (cheap: the lexer is shared). The
server compiles (`validate`) on a worker thread before it submits, which both reports bad grammars
as HTTP 400 and keeps that cost off the engine loop and the event loop.
"""

from __future__ import annotations

import collections
import threading

import numpy as np
from llguidance import LLExecutor, LLMatcher, LLTokenizer
from llguidance.numpy import fill_next_token_bitmask, fill_next_token_bitmask_par

__all__ = ["GrammarBackend", "GrammarError", "bitmask_width", "allow_all_bitmask"]


class GrammarError(ValueError):
    """A grammar llguidance cannot compile (its message says why)."""


def bitmask_width(vocab_size: int) -> int:
    """int32 words per token mask row: one bit per vocabulary id (llguidance's layout)."""
    return (vocab_size + 31) // 32


def allow_all_bitmask(rows: int, vocab_size: int) -> np.ndarray:
    return np.full((rows, bitmask_width(vocab_size)), -1, np.int32)


class GrammarBackend:
    def __init__(self, tokenizer, vocab_size: int, eos_token_ids, cache_size: int = 128) -> None:
        """`tokenizer` is dgjax's Tokenizer; `vocab_size` the model's (embedding rows, which may
        exceed the tokenizer's: ids past it are never allowed); EOS ids end an accepted grammar."""
        self._text_tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.eos_token_ids = list(eos_token_ids)
        self._ll_tokenizer: LLTokenizer | None = None
        self._executor: LLExecutor | None = None
        self._cache: collections.OrderedDict[str, LLMatcher] = collections.OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @property
    def ll_tokenizer(self) -> LLTokenizer:
        with self._lock:
            if self._ll_tokenizer is None:
                self._ll_tokenizer = LLTokenizer(
                    self._text_tokenizer.backend.to_str(), n_vocab=self.vocab_size,
                    eos_token=self.eos_token_ids or None,
                )
            return self._ll_tokenizer

    def _compiled(self, grammar: str) -> LLMatcher:
        with self._lock:
            hit = self._cache.get(grammar)
            if hit is not None:
                self._cache.move_to_end(grammar)
                return hit
        matcher = LLMatcher(self.ll_tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise GrammarError(matcher.get_error())
        with self._lock:
            self._cache[grammar] = matcher
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return matcher

    def validate(self, grammar: str) -> None:
        """Compile (and cache) `grammar`; raises GrammarError. Call it off the engine thread."""
        self._compiled(grammar)

    def matcher(self, grammar: str) -> LLMatcher:
        """A fresh matcher for one request (its own parse state)."""
        return self._compiled(grammar).deep_copy()

    def fill_bitmask(self, rows: list[tuple[LLMatcher, int]], bitmask: np.ndarray) -> None:
        """Write each matcher's next-token mask into its row of `bitmask` [B, W] int32.

        Several rows are computed in parallel on llguidance's thread pool (the GIL is released).
        """
        if len(rows) == 1:
            matcher, row = rows[0]
            fill_next_token_bitmask(matcher, bitmask, row)
        elif rows:
            if self._executor is None:
                self._executor = LLExecutor()
            fill_next_token_bitmask_par(self._executor, rows, bitmask)

    def special_token_ids(self, texts) -> dict[str, int]:
        """Which of `texts` are single added tokens; llguidance treats every added token as special,
        so a grammar must name these by id (their text spelled out in pieces would not match)."""
        out = {}
        for text in texts:
            token_id = self._text_tokenizer.token_to_id(text)
            if token_id is not None and token_id < self.vocab_size and \
                    self.ll_tokenizer.is_special_token(token_id):
                out[text] = token_id
        return out

    def allowed_token_ids(self, matcher: LLMatcher) -> np.ndarray:
        """The ids `matcher` allows next (tests and debugging)."""
        bitmask = allow_all_bitmask(1, self.vocab_size)
        fill_next_token_bitmask(matcher, bitmask, 0)
        bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[: self.vocab_size]
        return np.flatnonzero(bits)
