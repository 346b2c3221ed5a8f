"""One request's output text: incremental detokenization followed by stop-string matching."""

from __future__ import annotations

from collections.abc import Sequence

from dgjax.text.detokenizer import Decoder, IncrementalDetokenizer
from dgjax.text.stop import StopResult, StopStringMatcher


class TextStream:
    """Generated token ids in, final text deltas out.

    Feed every generated token except the one that ended generation (EOS or a stop token id: its
    text is not part of the output). Once a stop string matched, `stopped` names it, the request
    should finish, and further input is ignored. Call `finish()` when generation ends for any other
    reason to release text held back as a possible stop-string prefix or incomplete character.
    """

    def __init__(
        self,
        tokenizer: Decoder,
        *,
        skip_special_tokens: bool = True,
        stop: Sequence[str] = (),
        include_stop_str_in_output: bool = False,
        prompt_ids: Sequence[int] | None = None,
    ):
        self._detok = IncrementalDetokenizer(tokenizer, skip_special_tokens, prompt_ids)
        self._matcher = StopStringMatcher(stop, include_stop_str_in_output)
        self._finished = False
        self.text = ""  # everything released so far

    @property
    def stopped(self) -> str | None:
        """The stop string that ended the text, if one did."""
        return self._matcher.stopped

    def add(self, token_ids: int | Sequence[int]) -> StopResult:
        if self._finished or self._matcher.finished:
            return StopResult("")
        result = self._matcher.feed(self._detok.add(token_ids))
        self.text += result.text
        return result

    def finish(self) -> StopResult:
        """End of generation: the detokenizer's and the matcher's held-back text, in that order
        (the detokenizer's tail can still complete a stop string)."""
        if self._finished or self._matcher.finished:
            self._finished = True
            return StopResult("")
        self._finished = True
        result = self._matcher.feed(self._detok.flush())
        text = result.text + ("" if result.stop is not None else self._matcher.flush())
        self.text += text
        return StopResult(text, result.stop)
