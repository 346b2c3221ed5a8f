"""Continuous batching on the host: who waits, who prefills which chunk, who decodes this tick.

The scheduler owns the sequences' host-side state and the page pool; it decides, the engine
dispatches. Admission reserves pages for prompt + max new tokens up front, so a running sequence can
never run out of KV pages. Each engine iteration runs at most one prefill chunk (oldest first) and one
decode tick over every decoding sequence, which interleaves long prompts with ongoing decode.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import time
from typing import Callable

import numpy as np

from dgjax.runtime.output_processor import OutputProcessor
from dgjax.runtime.page_pool import PagePool
from dgjax.runtime.types import GenerationRequest, RequestOutput


class SeqState(enum.Enum):
    WAITING = "waiting"
    PREFILL = "prefill"
    DECODE = "decode"
    DRAINING = "draining"  # every token dispatched; waiting for the last results
    DONE = "done"


@dataclasses.dataclass(eq=False)
class Sequence:
    req: GenerationRequest
    on_output: Callable[[RequestOutput], None]
    max_new: int  # tokens to generate at most (max_tokens capped by the context limit)
    seed: int
    output: OutputProcessor
    arrival: float = dataclasses.field(default_factory=time.monotonic)
    state: SeqState = SeqState.WAITING
    slot: int = -1
    num_cached: int = 0  # prompt tokens whose KV came from the prefix cache
    num_prefilled: int = 0  # prompt tokens whose KV write has been dispatched
    num_dispatched: int = 0  # generated tokens whose sampling has been dispatched
    prompt_logprobs: list | None = None
    prompt_logprobs_sent: bool = False  # delivered with the first output
    matcher: object | None = None  # llguidance LLMatcher: the request's grammar state (structured output)

    @property
    def prompt(self) -> list[int]:
        return self.req.prompt_token_ids

    @property
    def request_id(self) -> str:
        return self.req.request_id

    @property
    def wants_prompt_logprobs(self) -> bool:
        return self.req.params.prompt_logprobs is not None

    @property
    def finished(self) -> bool:
        return self.state == SeqState.DONE


@dataclasses.dataclass
class PrefillWork:
    seq: Sequence
    start: int
    length: int
    is_last: bool


class QueueFullError(RuntimeError):
    """More requests are waiting than the engine accepts (the server answers 503)."""


class Scheduler:
    def __init__(self, pool: PagePool, num_slots: int, chunk_for: Callable[[int], int]):
        self.pool = pool
        self._chunk_for = chunk_for
        self.waiting: collections.deque[Sequence] = collections.deque()
        self.prefilling: list[Sequence] = []
        self.decoding: list[Sequence] = []
        self._free_slots = list(range(num_slots - 1, -1, -1))
        self.by_id: dict[str, Sequence] = {}

    # ---- bookkeeping -------------------------------------------------------------------------
    @property
    def num_running(self) -> int:
        return len(self.by_id) - len(self.waiting)

    def add(self, seq: Sequence) -> None:
        """Queue a sequence; the queue bound is enforced by `Engine.submit`, where the caller sees it."""
        self.by_id[seq.request_id] = seq
        self.waiting.append(seq)

    def admit(self) -> list[Sequence]:
        """Move waiting sequences into prefill while slots and page reservations allow (FIFO)."""
        admitted = []
        while self.waiting and self._free_slots:
            seq = self.waiting[0]
            total = len(seq.prompt) + seq.max_new
            use_cache = not seq.wants_prompt_logprobs
            if not self.pool.try_reserve(seq.request_id, seq.prompt, total,
                                         use_prefix_cache=use_cache, salt=seq.req.cache_salt):
                break
            self.waiting.popleft()
            seq.num_cached = self.pool.num_cached_tokens(seq.request_id)
            seq.num_prefilled = seq.num_cached
            seq.slot = self._free_slots.pop()
            seq.state = SeqState.PREFILL
            self.prefilling.append(seq)
            admitted.append(seq)
        return admitted

    def finish(self, seq: Sequence) -> None:
        """Release a sequence's slot and pages (finished, aborted or failed)."""
        if seq.state == SeqState.DONE:
            return
        if seq.state == SeqState.WAITING:
            self.waiting.remove(seq)
        else:
            if seq in self.prefilling:
                self.prefilling.remove(seq)
            if seq in self.decoding:
                self.decoding.remove(seq)
            written = seq.prompt + seq.output.token_ids
            self.pool.register_full_pages(seq.request_id, written[: self._kv_written(seq)])
            self.pool.free(seq.request_id)
            self._free_slots.append(seq.slot)
        seq.state = SeqState.DONE
        self.by_id.pop(seq.request_id, None)

    @staticmethod
    def _kv_written(seq: Sequence) -> int:
        if seq.num_dispatched == 0:
            return seq.num_prefilled
        return len(seq.prompt) + seq.num_dispatched - 1

    # ---- work selection ----------------------------------------------------------------------
    def next_prefill(self) -> PrefillWork | None:
        if not self.prefilling:
            return None
        seq = self.prefilling[0]
        remaining = len(seq.prompt) - seq.num_prefilled
        chunk = self._chunk_for(remaining)
        length = min(chunk, remaining)
        start = seq.num_prefilled
        self.pool.ensure_capacity(seq.request_id, start + length)
        seq.num_prefilled += length
        is_last = seq.num_prefilled == len(seq.prompt)
        if not seq.wants_prompt_logprobs:
            self.pool.register_full_pages(seq.request_id, seq.prompt[: seq.num_prefilled])
        if is_last:
            self.prefilling.pop(0)
            if seq.max_new > 0:
                seq.num_dispatched = 1  # the prefill samples the first token
                if seq.max_new > 1:
                    seq.state = SeqState.DECODE
                    self.decoding.append(seq)
                else:
                    seq.state = SeqState.DRAINING
            else:
                seq.state = SeqState.DRAINING
        return PrefillWork(seq, start, length, is_last)

    def next_decode(self, max_width: int) -> list[Sequence]:
        """The sequences of this decode tick; reserves their next KV slot and advances counters."""
        rows = self.decoding[:max_width]
        for seq in rows:
            self.pool.ensure_capacity(seq.request_id, len(seq.prompt) + seq.num_dispatched)
            seq.num_dispatched += 1
            if seq.num_dispatched >= seq.max_new:
                seq.state = SeqState.DRAINING
        self.decoding = [s for s in self.decoding if s.state == SeqState.DECODE]
        return rows

    def stop_decoding(self, seq: Sequence) -> None:
        """A stop was seen in the results: dispatch nothing more for it."""
        if seq in self.decoding:
            self.decoding.remove(seq)

    def block_table(self, seq: Sequence, width: int) -> np.ndarray:
        row = np.zeros((width,), np.int32)
        pages = self.pool.block_table(seq.request_id)
        row[: len(pages)] = pages
        return row
