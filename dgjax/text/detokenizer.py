"""Incremental detokenization for streaming: token ids in, text deltas out.

Decoding token by token is wrong for two reasons: a byte-level token can be a fragment of a UTF-8
character, and SentencePiece-style decoders change a token's text depending on its position (the
leading space of the first token is dropped). So each step decodes a short window of recent tokens
twice, with and without the new ones, and emits the difference (vLLM's and TGI's prefix/read offset
scheme). While the window's text ends in U+FFFD the character is still incomplete, and nothing is
emitted until a later token completes it or the stream ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

REPLACEMENT_CHAR = "\ufffd"
# Prompt tokens decoded ahead of the first generated one: enough context for position-dependent
# decoders, few enough to keep each step cheap.
PROMPT_CONTEXT_TOKENS = 5


class Decoder(Protocol):
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str: ...


class IncrementalDetokenizer:
    """Turns a growing list of generated token ids into text deltas.

    The deltas, concatenated with `flush()`, equal
    `decode(context + ids)[len(decode(context)):]`, where `context` is the last few prompt tokens
    (none by default, and then simply `decode(ids)`). For byte-level BPE tokenizers both are the
    same as `decode(ids)`.
    """

    def __init__(
        self,
        tokenizer: Decoder,
        skip_special_tokens: bool = True,
        prompt_ids: Sequence[int] | None = None,
    ):
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        context = list(prompt_ids[-PROMPT_CONTEXT_TOKENS:]) if prompt_ids else []
        self._ids: list[int] = context
        self._prefix_offset = 0  # window start: tokens before it are never decoded again
        self._read_offset = len(context)  # tokens before it have been emitted as text
        self._num_context = len(context)

    @property
    def token_ids(self) -> list[int]:
        """The generated ids seen so far (without the prompt context)."""
        return self._ids[self._num_context :]

    def _decode(self, start: int, end: int | None = None) -> str:
        return self._tokenizer.decode(self._ids[start:end], skip_special_tokens=self._skip)

    def add(self, token_ids: int | Sequence[int]) -> str:
        """Append generated token(s); return the text that became final."""
        if isinstance(token_ids, int):
            self._ids.append(token_ids)
        else:
            self._ids.extend(token_ids)
        prefix_text = self._decode(self._prefix_offset, self._read_offset)
        new_text = self._decode(self._prefix_offset)
        if len(new_text) <= len(prefix_text) or new_text.endswith(REPLACEMENT_CHAR):
            return ""
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._ids)
        return new_text[len(prefix_text) :]

    def flush(self) -> str:
        """The held-back tail at the end of the stream (e.g. a truly invalid byte sequence)."""
        prefix_text = self._decode(self._prefix_offset, self._read_offset)
        new_text = self._decode(self._prefix_offset)
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._ids)
        return new_text[len(prefix_text) :]
