"""The engine: loads a model, compiles its buckets, and runs the step loop on its own thread.

Callers (the HTTP server, the offline `LLM`) talk to it only through `submit`/`abort` and the
`on_output` callbacks; the loop never waits on them. Within the loop, step N+1 is dispatched before
the results of step N are read back, so the device never idles on the host; a stop (EOS, stop string)
is therefore seen one tick late and the extra token is dropped.

Structured output (a request with a grammar): the mask of token N+1 depends on token N, so while
such a request decodes, each tick is split in two executables. The forward pass of tick N+1 needs
only device-resident tokens and is dispatched first; then tick N's tokens are read, every grammar
consumes its token, llguidance computes the masks on the host (in parallel across requests) while
the forward pass runs, and the sampling half is dispatched with them. Unconstrained rows share the
tick with an all-ones mask. A prefill's first token gets its mask at dispatch (the grammar's start).
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
from typing import Callable

import jax
import numpy as np

from dgjax.config import EngineConfig, ModelConfig
from dgjax.runtime import compile_cache
from dgjax.runtime.loading import LoadedModel, load_model
from dgjax.runtime.output_processor import OutputProcessor
from dgjax.runtime.scheduler import PrefillWork, QueueFullError, Scheduler, Sequence
from dgjax.runtime.types import (
    FinishReason, GenerationRequest, RequestOutput, TokenLogprob,
)
from dgjax.runtime import sampler
from dgjax.runtime.executor import MAX_LOGIT_BIAS
from dgjax.structured.backend import GrammarBackend, allow_all_bitmask

__all__ = ["Engine", "EngineStats", "QueueFullError"]

log = logging.getLogger("dgjax.engine")


@dataclasses.dataclass
class EngineStats:
    num_running: int
    num_waiting: int
    kv_usage: float
    prefix_cache_queries: int
    prefix_cache_hits: int
    num_preemptions: int = 0


@dataclasses.dataclass
class _Inflight:
    kind: str  # "prefill" | "decode"
    seqs: list[Sequence]
    result: object
    work: PrefillWork | None = None


class Engine:
    def __init__(self, model_dir: str, config: EngineConfig | None = None):
        self.model_dir = model_dir
        self.config = config or EngineConfig()
        self._loaded: LoadedModel | None = None
        self._inbox: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._crashed: BaseException | None = None
        self._lock = threading.Lock()
        self._rng = np.random.default_rng(self.config.seed)
        self._inflight: list[_Inflight] = []
        self._st_cache: tuple[int, tuple, object] | None = None  # (width, sequences, device tensors)
        self.compile_summary: dict[str, int] = {}
        self.cache_dir = compile_cache.enable(self.config.compilation_cache_dir)
        self.model_config: ModelConfig = ModelConfig.from_dir(model_dir)
        from dgjax.text.tokenizer import Tokenizer

        self.tokenizer = Tokenizer.from_dir(model_dir)
        self.max_model_len = self.config.resolved_max_model_len(self.model_config)
        self.eos_token_ids = tuple(
            sorted(set(self.model_config.eos_token_ids) | set(self.tokenizer.eos_token_ids))
        )
        self.structured = GrammarBackend(self.tokenizer, self.model_config.vocab_size, self.eos_token_ids)

    # ---- lifecycle ---------------------------------------------------------------------------
    def load(self, progress: Callable[[str], None] | None = None) -> None:
        """Load weights, size the KV pool, compile every bucket (from the persistent cache if warm)."""
        if self._loaded is not None:
            return
        self._loaded = load_model(self.model_dir, self.model_config, self.config, self.max_model_len)
        ex = self._loaded.executor
        self.compile_summary = ex.compile_all(progress)
        self.scheduler = Scheduler(self._loaded.pool, ex.num_slots, ex.prefill_chunk_size)

    def start(self, progress: Callable[[str], None] | None = None) -> None:
        self.load(progress)
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="dgjax-engine", daemon=True)
            self._thread.start()

    def is_healthy(self) -> bool:
        """True while the step loop runs (what /health reports)."""
        return self._thread is not None and self._thread.is_alive() and self._crashed is None

    def shutdown(self) -> None:
        self._stop.set()
        self._inbox.put(("wake", None))
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    # ---- requests (thread-safe) --------------------------------------------------------------
    def submit(self, req: GenerationRequest, on_output: Callable[[RequestOutput], None]) -> None:
        n = len(req.prompt_token_ids)
        if n == 0:
            raise ValueError("the prompt is empty")
        if n >= self.max_model_len:
            raise ValueError(
                f"the prompt has {n} tokens; this model's context is {self.max_model_len} tokens, "
                "leaving no room to generate"
            )
        vocab = self.model_config.vocab_size
        bad = [t for t in req.prompt_token_ids if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"prompt token id {bad[0]} is outside the vocabulary [0, {vocab})")
        p = req.params
        if len(p.logit_bias) > MAX_LOGIT_BIAS:
            raise ValueError(f"logit_bias has more than {MAX_LOGIT_BIAS} entries")
        room = self.max_model_len - n
        max_new = room if p.max_tokens is None else min(p.max_tokens, room)
        if not self.is_healthy():
            raise RuntimeError("the engine is not running")
        with self._lock:
            seed = int(self._rng.integers(0, 2**31 - 1)) if p.seed is None else p.seed
            queued = self._inbox.qsize() + (len(self.scheduler.waiting) if self._loaded else 0)
            if queued >= self.config.max_queue:
                raise QueueFullError(f"{queued} requests are already waiting")
        # A GrammarError is a ValueError (the request's fault); compiled grammars are cached, so
        # the server's earlier `structured.validate` makes this a copy.
        matcher = self.structured.matcher(p.grammar) if p.grammar is not None else None
        out = OutputProcessor(self.tokenizer, req.request_id, req.prompt_token_ids, p, self.eos_token_ids)
        seq = Sequence(req=req, on_output=on_output, max_new=max_new, seed=seed, output=out,
                       matcher=matcher)
        self._inbox.put(("add", seq))

    def abort(self, request_id: str) -> None:
        self._inbox.put(("abort", request_id))

    def stats(self) -> EngineStats:
        pool = self._loaded.pool
        return EngineStats(
            num_running=self.scheduler.num_running,
            num_waiting=len(self.scheduler.waiting) + self._inbox.qsize(),
            kv_usage=pool.usage(),
            prefix_cache_queries=pool.prefix_queries_tokens,
            prefix_cache_hits=pool.prefix_hit_tokens,
        )

    # ---- the loop ----------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                busy = bool(self._inflight) or self.scheduler.by_id
                self._drain_inbox(block=not busy)
                self._iteration()
        except Exception as e:  # the loop must never die silently: fail every request, then re-raise
            self._crashed = e
            log.exception("engine loop crashed")
            for seq in list(self.scheduler.by_id.values()):
                self._emit_final(seq, FinishReason.ABORT, error="engine failure")
            raise
        finally:
            for seq in list(self.scheduler.by_id.values()):
                self._emit_final(seq, FinishReason.ABORT)

    def _drain_inbox(self, block: bool) -> None:
        try:
            item = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            kind, payload = item
            if kind == "add":
                self.scheduler.add(payload)
            elif kind == "abort":
                seq = self.scheduler.by_id.get(payload)
                if seq is not None:
                    self._emit_final(seq, FinishReason.ABORT)
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _iteration(self) -> None:
        ex = self._loaded.executor
        for seq in self.scheduler.admit():
            if seq.req.params.needs_penalties():
                row = np.zeros((self.model_config.vocab_size,), np.bool_)
                row[np.asarray(seq.prompt, np.int64)] = True
                ex.init_slot(seq.slot, row)
        dispatched: list[_Inflight] = []
        work = self.scheduler.next_prefill()
        if work is not None:
            dispatched.append(self._dispatch_prefill(work))
        rows = self.scheduler.next_decode(ex.decode_buckets[-1])
        if rows and any(s.matcher is not None for s in rows):
            self._constrained_decode(rows, dispatched)
            return
        if rows:
            dispatched.append(self._dispatch_decode(rows))
        previous, self._inflight = self._inflight, dispatched
        for item in previous:
            self._process(item)

    def _constrained_decode(self, rows: list[Sequence], dispatched: list[_Inflight]) -> None:
        """A decode tick with grammar rows: forward first, masks on the host meanwhile, then sample."""
        ex = self._loaded.executor
        width, slot_ids, active, tables = self._decode_layout(rows)
        logits = ex.decode_forward(slot_ids, tables, active)
        previous, self._inflight = self._inflight, []
        for item in previous:
            self._process(item)
        in_tick = set(rows)
        pending = []
        for item in dispatched:  # this iteration's prefill: read it now if it fed a grammar row
            seq = item.seqs[0]
            if item.work.is_last and seq in in_tick and seq.matcher is not None:
                self._process(item)
            else:
                pending.append(item)
        bitmask = self._grammar_masks(rows, width)
        want_top = any((s.req.params.logprobs or 0) > 0 for s in rows)
        result = ex.decode_sample(logits, slot_ids, active, self._sampling(rows, width), bitmask, want_top)
        self._inflight = pending + [_Inflight("decode", rows, result)]

    def _grammar_masks(self, rows: list[Sequence], width: int) -> np.ndarray:
        """[width, W] int32 next-token masks: each live grammar row's, all ones elsewhere."""
        bitmask = allow_all_bitmask(width, self.model_config.vocab_size)
        live = [(s.matcher, i) for i, s in enumerate(rows) if s.matcher is not None and not s.finished]
        self.structured.fill_bitmask(live, bitmask)
        for _, i in live:
            if not bitmask[i].any():  # a dead end (cannot happen for a sound grammar): allow EOS
                log.warning("grammar of %s allows no token; ending it with EOS", rows[i].request_id)
                words = bitmask.view(np.uint32)
                for eos in self.eos_token_ids:
                    words[i, eos // 32] |= np.uint32(1 << (eos % 32))
        return bitmask

    def _sampling(self, seqs: list[Sequence], width: int):
        """The rows' sampling tensors on the device, reused while the tick has the very same sequences. The
        cache holds the sequences themselves: keyed by id() alone, a freed sequence's address could come
        back as a new sequence and hand it the old one's temperature and seed."""
        cached = self._st_cache
        if cached is not None and cached[0] == width and len(cached[1]) == len(seqs) \
                and all(a is b for a, b in zip(cached[1], seqs)):
            return cached[2]
        host = sampler.build_sampling_tensors(
            [s.req.params for s in seqs], width, MAX_LOGIT_BIAS, [s.seed for s in seqs]
        )
        dev = self._loaded.executor.put(host)  # one batched transfer for every leaf
        self._st_cache = (width, tuple(seqs), dev)
        return dev

    def _dispatch_prefill(self, work: PrefillWork) -> _Inflight:
        ex = self._loaded.executor
        seq = work.seq
        chunk = ex.prefill_chunk_size(work.length)
        tokens = np.zeros((chunk,), np.int32)
        tokens[: work.length] = seq.prompt[work.start: work.start + work.length]
        nxt = np.zeros((chunk,), np.int32)
        following = seq.prompt[work.start + 1: work.start + work.length + 1]
        nxt[: len(following)] = following
        st = sampler.build_sampling_tensors([seq.req.params], 1, MAX_LOGIT_BIAS, [seq.seed])
        bitmask = self._grammar_masks([seq], 1) if seq.matcher is not None and work.is_last else None
        result = ex.prefill(
            seq.slot, tokens, nxt, work.start, work.length,
            self.scheduler.block_table(seq, ex.max_pages_per_seq), work.is_last, st,
            seq.wants_prompt_logprobs, bitmask,
        )
        return _Inflight("prefill", [seq], result, work)

    def _decode_layout(self, rows: list[Sequence]):
        """(width, slot_ids, active, block tables) of a decode tick, as device arrays. They change only when
        rows join or leave or a row starts a new page, so the last tick's copies are reused otherwise: no
        host-to-device transfers on most ticks."""
        ex = self._loaded.executor
        width = ex.decode_width(len(rows))
        slot_ids = np.full((width,), ex.pad_slot, np.int32)
        active = np.zeros((width,), np.bool_)
        tables = np.zeros((width, ex.max_pages_per_seq), np.int32)
        for i, seq in enumerate(rows):
            slot_ids[i] = seq.slot
            active[i] = True
            tables[i] = self.scheduler.block_table(seq, ex.max_pages_per_seq)
        return (width, *ex.decode_layout(slot_ids, active, tables))

    def _dispatch_decode(self, rows: list[Sequence]) -> _Inflight:
        ex = self._loaded.executor
        width, slot_ids, active, tables = self._decode_layout(rows)
        want_top = any((s.req.params.logprobs or 0) > 0 for s in rows)
        st = self._sampling(rows, width)
        result = ex.decode(slot_ids, tables, active, st, want_top)
        return _Inflight("decode", rows, result)

    # ---- results -----------------------------------------------------------------------------
    def _process(self, item: _Inflight) -> None:
        if item.kind == "prefill":
            res, plp = jax.device_get(item.result)
            seq = item.seqs[0]
            if seq.finished:
                return
            if plp is not None:
                self._collect_prompt_logprobs(seq, item.work, plp)
            if not item.work.is_last:
                return
            if seq.max_new == 0:
                self._emit_final(seq, FinishReason.LENGTH)
                return
            self._accept(seq, res, 0)
        else:
            res = jax.device_get(item.result)
            for i, seq in enumerate(item.seqs):
                if not seq.finished:
                    self._accept(seq, res, i)

    def _collect_prompt_logprobs(self, seq: Sequence, work: PrefillWork, plp) -> None:
        if seq.prompt_logprobs is None:
            seq.prompt_logprobs = [None]
        k = seq.req.params.prompt_logprobs or 0
        for t in range(work.length):
            pos = work.start + t + 1
            if pos >= len(seq.prompt):
                break
            top = [(int(a), float(b)) for a, b in zip(plp.top_ids[t][:k], plp.top_logprobs[t][:k])]
            seq.prompt_logprobs.append(TokenLogprob(seq.prompt[pos], float(plp.logprobs[t]), top))

    def _accept(self, seq: Sequence, res, row: int) -> None:
        lp = None
        if seq.req.params.logprobs is not None:
            k = seq.req.params.logprobs
            top = [(int(a), float(b)) for a, b in zip(res.top_ids[row][:k], res.top_logprobs[row][:k])]
            lp = TokenLogprob(int(res.tokens[row]), float(res.logprobs[row]), top)
        token = int(res.tokens[row])
        if seq.matcher is not None and not seq.matcher.consume_token(token):
            # The mask made this impossible; if it happens, fail loudly rather than emit bad output.
            self._emit_final(seq, FinishReason.ABORT,
                             error=f"sampled token {token} violates the grammar: {seq.matcher.get_error()}")
            return
        stop = seq.output.add_token(token, lp)
        if stop is None and seq.matcher is not None and seq.matcher.is_stopped():
            stop = (FinishReason.STOP, None)  # the grammar is complete: nothing but EOS could follow
        if stop is None and len(seq.output.token_ids) >= seq.max_new:
            stop = (FinishReason.LENGTH, None)
        if stop is not None:
            self._emit_final(seq, stop[0], stop_reason=stop[1])
            return
        self._emit(seq)

    def _first_fields(self, seq: Sequence) -> dict:
        fields = {"num_prompt_tokens": len(seq.prompt), "num_cached_tokens": seq.num_cached}
        if seq.prompt_logprobs is not None and not seq.prompt_logprobs_sent:
            fields["prompt_logprobs"] = seq.prompt_logprobs
            seq.prompt_logprobs_sent = True
        return fields

    def _emit(self, seq: Sequence) -> None:
        ids, text, lps = seq.output.take_delta()
        if not ids and not text:
            return
        self._deliver(seq, RequestOutput(
            request_id=seq.request_id, token_ids=ids, text=text, logprobs=lps,
            num_generated_tokens=len(seq.output.token_ids), **self._first_fields(seq),
        ))

    @staticmethod
    def _deliver(seq: Sequence, out: RequestOutput) -> None:
        try:
            seq.on_output(out)
        except Exception:  # a broken consumer must not take the loop (and everyone else) down
            log.exception("on_output callback failed for %s", seq.request_id)

    def _emit_final(self, seq: Sequence, reason: FinishReason, stop_reason=None, error=None) -> None:
        if seq.finished:
            return
        self.scheduler.stop_decoding(seq)
        self.scheduler.finish(seq)
        ids, text, lps = seq.output.take_final(reason)
        self._deliver(seq, RequestOutput(
            request_id=seq.request_id, token_ids=ids, text=text, logprobs=lps, finished=True,
            finish_reason=reason, stop_reason=stop_reason, error=error,
            num_generated_tokens=len(seq.output.token_ids), **self._first_fields(seq),
        ))
