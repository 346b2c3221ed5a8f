"""A minimal paged-cache driver for model tests: allocates shuffled pages, builds ForwardBatches, steps.

It plays the executor's role just far enough to exercise the ForwardBatch contract: fixed bucket shapes
(so few compiles), padding tokens at garbage positions, padding rows, non-contiguous page ids.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from dgjax.models.batch import ForwardBatch, create_kv_cache
from dgjax.models.registry import get_family
from dgjax.sharding import DEFAULT_RULES

GARBAGE_POSITIONS = (0, 1, 7777, 5)  # padding tokens' positions are arbitrary: make them collide with real ones


@functools.partial(jax.jit, static_argnames=("cfg",))
def step_logits(params, kv, batch, cfg):
    family = get_family(cfg)
    hidden, kv = family.forward(params, kv, batch, cfg)
    return family.logits(params, hidden, cfg), kv


class PagedRunner:
    """Holds a KV cache and per-sequence page lists; `step` runs one batch of (seq_id, tokens) rows."""

    def __init__(self, cfg, params, mesh, *, num_pages=80, page_size=4, max_pages=8, seed=0, dtype=jnp.float32):
        self.cfg, self.params, self.page_size, self.max_pages = cfg, params, page_size, max_pages
        self.kv = create_kv_cache(cfg, num_pages, page_size, dtype, mesh, DEFAULT_RULES)
        self.free = list(np.random.default_rng(seed).permutation(np.arange(1, num_pages)))
        self.pages: dict[object, list[int]] = {}
        self.lens: dict[object, int] = {}

    def _row(self, seq_id, tokens, width):
        start = self.lens.get(seq_id, 0)
        pages = self.pages.setdefault(seq_id, [])
        end = start + len(tokens)
        while len(pages) * self.page_size < end:
            pages.append(int(self.free.pop()))
        self.lens[seq_id] = end
        pos = np.resize(np.asarray(GARBAGE_POSITIONS, np.int32), width)
        pos[: len(tokens)] = np.arange(start, end)
        tok = np.zeros(width, np.int32)
        tok[: len(tokens)] = tokens
        table = np.zeros(self.max_pages, np.int32)
        table[: len(pages)] = pages
        return tok, pos, len(tokens), table, end

    def step(self, rows, width):
        """rows: list of (seq_id, token list) or None (a padding row). Returns per-row float32 logits [n, V]."""
        cols = []
        for row in rows:
            if row is None:
                z = np.zeros(width, np.int32)
                cols.append((z, z, 0, np.zeros(self.max_pages, np.int32), 0))
            else:
                cols.append(self._row(row[0], row[1], width))
        tok, pos, qlen, table, ctx = (np.stack([c[i] for c in cols]) for i in range(5))
        batch = ForwardBatch(
            tokens=jnp.asarray(tok), positions=jnp.asarray(pos), query_lens=jnp.asarray(qlen, jnp.int32),
            block_tables=jnp.asarray(table), context_lens=jnp.asarray(ctx, jnp.int32),
        )
        logits, self.kv = step_logits(self.params, self.kv, batch, self.cfg)
        logits = np.asarray(logits)
        return [None if row is None else logits[i, : len(row[1])] for i, row in enumerate(rows)]

    def prefill(self, seq_id, tokens, width=16):
        """Prefill in one or more chunks of at most `width`; returns logits for every token."""
        out = [self.step([(seq_id, list(tokens[i : i + width]))], width)[0] for i in range(0, len(tokens), width)]
        return np.concatenate(out)

    def greedy(self, seq_id, prompt, new_tokens, width=16):
        """Prefill `prompt`, then decode `new_tokens` tokens one at a time (B=1, T=1)."""
        last = self.prefill(seq_id, prompt, width)[-1]
        out = []
        for _ in range(new_tokens):
            out.append(int(np.argmax(last)))
            last = self.step([(seq_id, [out[-1]])], 1)[0][-1]
        return out
