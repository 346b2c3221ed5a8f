"""Ahead-of-time compiled step executables, one per bucket, called directly with the donated state.

Decode executables are keyed by (batch width, top-logprobs on/off), prefill executables by (chunk
size, prompt-logprobs on/off). While a request with a grammar decodes, its ticks run split in two
(`decode_forward` and `decode_sample`, per width) so that the host can compute the grammar masks
while the forward pass runs. All are lowered from abstract shapes before the first request and
kept in dicts; a request that would need a shape outside the buckets is split (prefill) or padded
(decode) by the scheduler, so serving never compiles. Each dispatch returns device arrays whose
host copy has already been started, so the caller can read tick N while tick N+1 runs.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from dgjax.pallas import pdl
from dgjax.runtime import (compile_cache, flat_call, graph_scheduling, param_packing, sampler, stable_buffers,
                           steps)
from dgjax.runtime.device_state import DeviceState
from dgjax.runtime.types import MAX_TOP_LOGPROBS

log = logging.getLogger("dgjax.executor")

MAX_LOGIT_BIAS = 300  # OpenAI accepts at most 300 logit_bias entries


def _abstract(tree):
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), tree)


class Executor:
    """Owns the parameters, the device state and the compiled step executables."""

    def __init__(self, family, cfg, mesh, params, state: DeviceState, *, decode_buckets,
                 prefill_buckets, max_pages_per_seq: int, aot_logprob_variants: bool = True,
                 aot_structured_variants: bool = True):
        self.family = family
        self.cfg = cfg
        self.mesh = mesh
        self.params = params
        # What the decode executables take (fewer arrays per call). Prefill takes `params` as they are: per-layer
        # slices of the stacks make every layer's fusions distinct, which XLA then compiles one by one (the
        # qwen3-30b-a3b prefill compiled in 20 s unpacked, 27 s with packed norms on the H200, s7d), while one
        # prefill chunk's ~1 ms of extra argument handling is small against the chunk itself.
        self.call_params = param_packing.pack(params)
        self.state = state
        self.decode_buckets = tuple(sorted(decode_buckets))
        self.prefill_buckets = tuple(sorted(prefill_buckets))
        self.max_pages_per_seq = max_pages_per_seq
        self.aot_logprob_variants = aot_logprob_variants
        self.aot_structured_variants = aot_structured_variants
        self.num_slots = state.last_tokens.shape[0] - 1
        self.pad_slot = self.num_slots
        self._replicated = NamedSharding(mesh, PartitionSpec())
        self._decode: dict[tuple[int, int], Any] = {}
        self._decode_forward: dict[int, Any] = {}
        self._decode_sample: dict[tuple[int, int], Any] = {}
        self._prefill: dict[tuple[int, bool], Any] = {}
        self._init_slot = None
        self.mask_words = sampler.bitmask_words(cfg.vocab_size)
        self._allow_all_row = None  # device [1, W] all-ones mask for prefills without a grammar
        # Early PDL triggers in the Pallas kernels pay for dense bf16 models and cost MoE / quantized ones on the
        # H200 (dgjax/pallas/pdl.py); $DGJAX_PDL_TRIGGER overrides.
        self.pdl_mode = pdl.mode_for_model(cfg.num_experts, params)
        log.info("Pallas PDL triggers (CUDA sm_90+ kernels only): %s",
                 os.environ.get(pdl.ENV_VAR) or f"{self.pdl_mode} (model default)")
        # How the kernels of a decode step's CUDA graph may overlap (dgjax/runtime/graph_scheduling.py).
        requested = graph_scheduling.resolve()
        self.graph_scheduling = graph_scheduling.for_model(cfg, requested)
        self.decode_options = graph_scheduling.compile_options(self.graph_scheduling)
        log.info("decode CUDA-graph scheduling: %s (%s=%s)", self.graph_scheduling, graph_scheduling.ENV_VAR,
                 requested)
        # Decode ticks read their layout from and write their results into the same buffers every tick, so their
        # CUDA graphs keep every address and XLA does not re-record them (dgjax/runtime/stable_buffers.py).
        self.stable = stable_buffers.enabled()
        self._mailboxes: dict[tuple[int, int], Any] = {}  # (width, top) -> StepResult the tick writes into
        self._copy_out: dict[tuple[int, int], Any] = {}  # (width, top) -> executable copying it for the host
        self._logit_boxes: dict[int, jax.Array] = {}  # width -> logits buffer of the split tick's forward half
        self._layouts: dict[int, tuple] = {}  # width -> (host layout arrays, their device buffers)
        self._overwrite_layout: dict[int, Any] = {}
        log.info("decode stable buffers: %s (%s)", "on" if self.stable else "off", stable_buffers.ENV_VAR)

    # ---- compilation -------------------------------------------------------------------------
    def _arg(self, shape, dtype):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=self._replicated)

    def _sampling_abstract(self, width: int):
        st = sampler.build_sampling_tensors([], width, MAX_LOGIT_BIAS, [])
        return jax.tree.map(lambda a: self._arg(a.shape, a.dtype), st)

    def _compile(self, name: str, fn: Callable, args: tuple, donate: tuple[int, ...],
                 returns_state_only: bool = False, options: dict[str, str] | None = None,
                 keep_unused: bool = False):
        """Lower and compile (with XLA compile `options`); outputs keep the state's shardings so the next call
        accepts them. `keep_unused`: pass arguments the step does not read (a mailbox) so they can be aliased."""
        t0 = time.perf_counter()
        hits0, misses0 = compile_cache.counts()
        state_sh = jax.tree.map(lambda a: a.sharding, self.state)
        out_sh = state_sh if returns_state_only else (state_sh, self._replicated)
        with pdl.model_default(self.pdl_mode):
            lowered = jax.jit(fn, donate_argnums=donate, out_shardings=out_sh, keep_unused=keep_unused).lower(*args)
        compiled = lowered.compile(compiler_options=options or None)
        hits, misses = compile_cache.counts()
        how = "loaded from cache" if hits > hits0 and misses == misses0 else "compiled"
        log.info("%s: %s in %.2fs", name, how, time.perf_counter() - t0)
        return compiled

    def compile_all(self, progress: Callable[[str], None] | None = None) -> dict[str, int]:
        """Compile (or load from the persistent cache) every bucket; returns hit/miss counts."""
        hits0, misses0 = compile_cache.counts()
        p_abs, s_abs = _abstract(self.call_params), _abstract(self.state)
        prefill_p_abs = _abstract(self.params)
        tops = (0, MAX_TOP_LOGPROBS) if self.aot_logprob_variants else (0,)
        plps = (False, True) if self.aot_logprob_variants else (False,)
        jobs = [("decode", (w, k)) for w in self.decode_buckets for k in tops]
        if self.aot_structured_variants:
            jobs += [("decode_forward", w) for w in self.decode_buckets]
            # One sampling half per width, with top-logprobs when those are compiled ahead of time at
            # all: it also serves ticks that want none (a wasted top-k only while grammars run), which
            # keeps the split tick's cost at about one extra forward-only compile per width.
            jobs += [("decode_sample", (w, max(tops))) for w in self.decode_buckets]
        jobs += [("prefill", (c, p)) for c in self.prefill_buckets for p in plps]
        jobs.append(("init_slot", None))
        for i, (kind, key) in enumerate(jobs):
            if progress:
                progress(f"compiling {kind} {key} ({i + 1}/{len(jobs)})")
            if kind == "decode":
                self._decode[key] = self._compile_decode(p_abs, s_abs, *key)
            elif kind == "decode_forward":
                self._decode_forward[key] = self._compile_decode_forward(p_abs, s_abs, key)
            elif kind == "decode_sample":
                self._decode_sample[key] = self._compile_decode_sample(s_abs, *key)
            elif kind == "prefill":
                self._prefill[key] = self._compile_prefill(prefill_p_abs, s_abs, *key)
            else:
                fn = steps.init_slot
                args = (s_abs, self._arg((), jnp.int32), self._arg((self.cfg.vocab_size,), jnp.bool_))
                self._init_slot = self._compile("init_slot", fn, args, (0,), returns_state_only=True)
        for w in self.decode_buckets if self.stable else ():
            self._overwrite_layout[w] = self._compile_overwrite_layout(w)
        hits, misses = compile_cache.counts()
        # the decode buckets' mailbox copies and layout overwrites are compiled too
        executables = len(jobs) + len(self._copy_out) + len(self._overwrite_layout)
        summary = {"executables": executables, "cache_hits": hits - hits0, "cache_misses": misses - misses0}
        decode_exes = list(self._decode.values()) + list(self._decode_forward.values())
        log.info(
            "buckets ready: decode widths %s, prefill chunks %s; %d executables, %d from cache, %d compiled; "
            "%d of %d decode executables called flat",
            list(self.decode_buckets), list(self.prefill_buckets), executables,
            summary["cache_hits"], summary["cache_misses"],
            sum(isinstance(e, flat_call.FlatCall) for e in decode_exes), len(decode_exes),
        )
        return summary

    def _compile_decode(self, p_abs, s_abs, width: int, num_top: int):
        fn = param_packing.taking_packed(steps.bind(steps.decode_tick, family=self.family, cfg=self.cfg,
                                                    num_top=num_top))
        args = (
            p_abs, s_abs,
            self._arg((width,), jnp.int32),
            self._arg((width, self.max_pages_per_seq), jnp.int32),
            self._arg((width,), jnp.bool_),
            self._sampling_abstract(width),
        )
        donate = (1,)
        if self.stable:
            args += (stable_buffers.mailbox_shapes(width, num_top, self._replicated),)
            donate = (1, 6)
            self._copy_out[(width, num_top)] = stable_buffers.compile_copy(
                stable_buffers.result_shapes(width, num_top, self._replicated), self._replicated)
        return flat_call.bind(self._compile(f"decode[B={width},top={num_top}]", fn, args, donate,
                                            options=self.decode_options, keep_unused=self.stable),
                              self.call_params)

    def _layout_shapes(self, width: int):
        return (self._arg((width,), jnp.int32), self._arg((width,), jnp.bool_),
                self._arg((width, self.max_pages_per_seq), jnp.int32))

    def _compile_overwrite_layout(self, width: int):
        return stable_buffers.compile_overwrite(self._layout_shapes(width), self._replicated)

    def _compile_decode_forward(self, p_abs, s_abs, width: int):
        fn = param_packing.taking_packed(steps.bind(steps.decode_forward, family=self.family, cfg=self.cfg))
        args = (
            p_abs, s_abs,
            self._arg((width,), jnp.int32),
            self._arg((width, self.max_pages_per_seq), jnp.int32),
            self._arg((width,), jnp.bool_),
        )
        donate = (1,)
        if self.stable:  # the logits land in the width's logits buffer (steps.decode_forward's `logits_box`)
            args += (self._arg((width, self.cfg.vocab_size), jnp.float32),)
            donate = (1, 5)
        return flat_call.bind(self._compile(f"decode_forward[B={width}]", fn, args, donate,
                                            options=self.decode_options, keep_unused=self.stable),
                              self.call_params)

    def _compile_decode_sample(self, s_abs, width: int, num_top: int):
        fn = steps.bind(steps.decode_sample, num_top=num_top)
        args = (
            s_abs,
            self._arg((width, self.cfg.vocab_size), jnp.float32),
            self._arg((width,), jnp.int32),
            self._arg((width,), jnp.bool_),
            self._sampling_abstract(width),
            self._arg((width, self.mask_words), jnp.int32),
        )
        return self._compile(f"decode_sample[B={width},top={num_top}]", fn, args, (0,), options=self.decode_options)

    def _compile_prefill(self, p_abs, s_abs, chunk: int, with_plp: bool):
        fn = steps.bind(
            steps.prefill_chunk, family=self.family, cfg=self.cfg,
            num_top=MAX_TOP_LOGPROBS, with_prompt_logprobs=with_plp,
        )
        i32 = jnp.int32
        args = (
            p_abs, s_abs,
            self._arg((), i32),
            self._arg((chunk,), i32),
            self._arg((chunk,), i32),
            self._arg((), i32),
            self._arg((), i32),
            self._arg((self.max_pages_per_seq,), i32),
            self._arg((), jnp.bool_),
            self._sampling_abstract(1),
            self._arg((1, self.mask_words), jnp.int32),
        )
        return self._compile(f"prefill[T={chunk},prompt_logprobs={with_plp}]", fn, args, (1,))

    # ---- dispatch ----------------------------------------------------------------------------
    def decode_width(self, n: int) -> int:
        for b in self.decode_buckets:
            if b >= n:
                return b
        raise ValueError(f"{n} decode rows exceed the largest bucket {self.decode_buckets[-1]}")

    def prefill_chunk_size(self, remaining: int) -> int:
        for c in self.prefill_buckets:
            if c >= remaining:
                return c
        return self.prefill_buckets[-1]

    def decode_layout(self, slot_ids: np.ndarray, active: np.ndarray, tables: np.ndarray) -> tuple:
        """The tick's layout on the device: the last copy while it is unchanged, else the new one, written
        (with stable buffers) into the width's previous buffers so the tick's CUDA graph keeps its addresses."""
        width = len(slot_ids)
        host = (slot_ids, active, tables)
        cached = self._layouts.get(width)
        if cached is not None and all(np.array_equal(a, b) for a, b in zip(cached[0], host)):
            return cached[1]
        sent = tuple(self.put(list(host)))  # one batched transfer
        if self.stable:
            overwrite = self._overwrite_layout.get(width)
            if overwrite is None:
                overwrite = self._overwrite_layout[width] = self._compile_overwrite_layout(width)
            # A width's first layout goes through the overwrite too (over a second copy), so that its buffers are
            # the runtime's own: a CPU client may hand back the numpy memory itself, which cannot be donated.
            old = cached[1] if cached is not None else tuple(self.put(list(host)))
            sent = tuple(overwrite(old, sent))
        self._layouts[width] = (tuple(a.copy() for a in host), sent)
        return sent

    def _take_box(self, boxes: dict, key, avals):
        """The buffers to donate to a stable-buffer step (`boxes[key]`, taken out of `boxes`: the
        step's output replaces them), or zeros of `avals` for a key's first step."""
        box = boxes.pop(key, None)
        return box if box is not None else stable_buffers.zeros(avals, self._replicated)

    def put(self, x):
        """x (an array or a pytree of them) replicated on the mesh, in one batched transfer."""
        return jax.device_put(x, self._replicated)

    def init_slot(self, slot: int, prompt_mask_row: np.ndarray) -> None:
        self.state = self._init_slot(self.state, np.int32(slot), prompt_mask_row)

    def decode(self, slot_ids, block_tables, active, st, want_top: bool):
        key = (len(slot_ids), MAX_TOP_LOGPROBS if want_top else 0)
        exe = self._decode.get(key)
        if exe is None:
            log.warning("cold compile while serving: decode %s was not compiled ahead of time", key)
            exe = self._decode[key] = self._compile_decode(_abstract(self.call_params), _abstract(self.state), *key)
        if not self.stable:
            self.state, res = exe(self.call_params, self.state, slot_ids, block_tables, active, st)
            _start_copy(res)
            return res
        box = self._take_box(self._mailboxes, key, stable_buffers.mailbox_shapes(*key, self._replicated))
        self.state, out = exe(self.call_params, self.state, slot_ids, block_tables, active, st, box)
        self._mailboxes[key] = stable_buffers.mailbox_of(out)
        res = self._copy_out[key](out)  # enqueued before the next tick donates the mailbox again
        _start_copy(res)
        return res

    def decode_forward(self, slot_ids, block_tables, active):
        """First half of a split tick: returns the logits (device) for `decode_sample`."""
        width = len(slot_ids)
        exe = self._decode_forward.get(width)
        if exe is None:
            log.warning("cold compile while serving: decode_forward %s was not compiled ahead of time", width)
            exe = self._decode_forward[width] = self._compile_decode_forward(
                _abstract(self.call_params), _abstract(self.state), width)
        if not self.stable:
            self.state, logits = exe(self.call_params, self.state, slot_ids, block_tables, active)
            return logits
        box = self._take_box(self._logit_boxes, width, self._arg((width, self.cfg.vocab_size), jnp.float32))
        # `decode_sample` reads these logits before the next forward half donates them again (one stream)
        self.state, logits = exe(self.call_params, self.state, slot_ids, block_tables, active, box)
        self._logit_boxes[width] = logits
        return logits

    def decode_sample(self, logits, slot_ids, active, st, bitmask, want_top: bool):
        """Second half: sample under the grammar `bitmask` [B, W] int32; copy-back started."""
        key = (len(slot_ids), MAX_TOP_LOGPROBS if want_top else 0)
        exe = self._decode_sample.get(key) or self._decode_sample.get((len(slot_ids), MAX_TOP_LOGPROBS))
        if exe is None:
            log.warning("cold compile while serving: decode_sample %s was not compiled ahead of time", key)
            exe = self._decode_sample[key] = self._compile_decode_sample(_abstract(self.state), *key)
        self.state, res = exe(self.state, logits, slot_ids, active, st, bitmask)
        _start_copy(res)
        return res

    def allow_all_mask_row(self) -> jax.Array:
        """The [1, W] mask a prefill without a grammar gets (kept on the device)."""
        if self._allow_all_row is None:
            self._allow_all_row = self.put(np.full((1, self.mask_words), -1, np.int32))
        return self._allow_all_row

    def prefill(self, slot, tokens, next_tokens, start_pos, num_valid, block_table, is_last, st,
                with_prompt_logprobs: bool, bitmask=None):
        """`bitmask` [1, W] int32: the first token's grammar mask (None: every token allowed)."""
        key = (len(tokens), with_prompt_logprobs)
        exe = self._prefill.get(key)
        if exe is None:
            log.warning("cold compile while serving: prefill %s was not compiled ahead of time", key)
            exe = self._prefill[key] = self._compile_prefill(_abstract(self.params), _abstract(self.state), *key)
        self.state, out = exe(
            self.params, self.state, np.int32(slot), tokens, next_tokens, np.int32(start_pos),
            np.int32(num_valid), block_table, np.bool_(is_last), st,
            self.allow_all_mask_row() if bitmask is None else bitmask,
        )
        _start_copy(out)
        return out


def _start_copy(tree) -> None:
    for leaf in jax.tree.leaves(tree):
        leaf.copy_to_host_async()
