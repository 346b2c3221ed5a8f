"""One request's generated tokens turned into deltas: ids, text (stop strings cut) and logprobs.

Every sampled token is kept in `token_ids` (the KV of those tokens is what the prefix cache may
register); EOS and stop-token ids end generation without adding their text.
"""

from __future__ import annotations

from dgjax.runtime.types import FinishReason, SamplingParams, TokenLogprob
from dgjax.text.stream import TextStream


class OutputProcessor:
    def __init__(self, tokenizer, request_id: str, prompt_ids: list[int], params: SamplingParams,
                 eos_token_ids: tuple[int, ...]):
        self.request_id = request_id
        self.token_ids: list[int] = []
        self._eos = frozenset(() if params.ignore_eos else eos_token_ids)
        self._stop_ids = frozenset(params.stop_token_ids)
        self._stream = TextStream(
            tokenizer,
            skip_special_tokens=params.skip_special_tokens,
            stop=params.stop,
            include_stop_str_in_output=params.include_stop_str_in_output,
            prompt_ids=prompt_ids,
        )
        self._ids: list[int] = []
        self._text: list[str] = []
        self._lps: list[TokenLogprob] | None = [] if params.logprobs is not None else None

    def add_token(self, token: int, logprob: TokenLogprob | None) -> tuple[FinishReason, str | int | None] | None:
        """Record a sampled token; returns (reason, stop_reason) when it ends generation."""
        self.token_ids.append(token)
        self._ids.append(token)
        if self._lps is not None and logprob is not None:
            self._lps.append(logprob)
        if token in self._eos:
            return FinishReason.STOP, None
        if token in self._stop_ids:
            return FinishReason.STOP, token
        res = self._stream.add(token)
        self._text.append(res.text)
        if res.stop is not None:
            return FinishReason.STOP, res.stop
        return None

    def take_delta(self) -> tuple[list[int], str, list[TokenLogprob] | None]:
        ids, text, lps = self._ids, "".join(self._text), self._lps
        self._ids, self._text = [], []
        if lps is not None:
            self._lps = []
        return ids, text, lps

    def take_final(self, reason: FinishReason) -> tuple[list[int], str, list[TokenLogprob] | None]:
        """The last delta, including text held back as a possible stop-string prefix."""
        self._text.append(self._stream.finish().text)
        return self.take_delta()
