"""The pure functions the executor compiles: one decode tick, one prefill chunk, one slot reset.

Each takes the donated `DeviceState` and returns the new one plus a small result pytree that the host
reads back asynchronously. Model and sampling both run inside, so a tick is a single executable.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import struct

from dgjax.models.batch import ForwardBatch
from dgjax.runtime import sampler
from dgjax.runtime.device_state import DeviceState


@struct.dataclass
class StepResult:
    tokens: jax.Array  # int32 [B]
    logprobs: jax.Array  # float32 [B]
    top_ids: jax.Array  # int32 [B, K]
    top_logprobs: jax.Array  # float32 [B, K]


@struct.dataclass
class PromptLogprobs:
    """Per chunk position t: the logprob of the prompt token at t+1, and the top-K there."""

    logprobs: jax.Array  # float32 [T]
    top_ids: jax.Array  # int32 [T, K]
    top_logprobs: jax.Array  # float32 [T, K]


def _result(res) -> StepResult:
    return StepResult(res.tokens, res.logprobs, res.top_ids, res.top_logprobs)


def _decode_logits(params, state: DeviceState, slot_ids, block_tables, active, family, cfg):
    """The model half of a decode tick: feed each slot's last token; returns (kv, logits [B, V])."""
    tokens = state.last_tokens[slot_ids]
    pos = state.positions[slot_ids]
    batch = ForwardBatch(
        tokens=tokens[:, None],
        positions=pos[:, None],
        query_lens=active.astype(jnp.int32),
        block_tables=block_tables,
        context_lens=jnp.where(active, pos + 1, 0),
    )
    hidden, kv = family.forward(params, state.kv, batch, cfg)
    return kv, family.logits(params, hidden[:, 0], cfg)


def _sample_and_advance(state: DeviceState, logits, slot_ids, active, st, bitmask, num_top):
    """The sampling half: draw the next token per slot and advance the slot's bookkeeping."""
    counts = state.output_counts[slot_ids]
    res = sampler.sample(
        logits, st, counts, state.prompt_mask[slot_ids], state.steps[slot_ids], num_top, bitmask
    )
    counts = sampler.update_counts(counts, res.tokens, active)
    step_inc = active.astype(jnp.int32)
    new_state = state.replace(
        last_tokens=state.last_tokens.at[slot_ids].set(res.tokens),
        positions=state.positions.at[slot_ids].add(step_inc),
        steps=state.steps.at[slot_ids].add(step_inc),
        output_counts=state.output_counts.at[slot_ids].set(counts),
    )
    return new_state, _result(res)


def decode_tick(params, state: DeviceState, slot_ids, block_tables, active, st, mailbox=None, *, family, cfg,
                num_top):
    """Feed each slot's last token, sample the next one, advance the slot's bookkeeping.

    `mailbox` (a StepResult of the result's shapes, donated by the caller) is not read: donating it lets XLA
    write the result into its buffers (dgjax/runtime/stable_buffers.py)."""
    del mailbox
    with jax.named_scope("decode_tick"):
        kv, logits = _decode_logits(params, state, slot_ids, block_tables, active, family, cfg)
        return _sample_and_advance(state.replace(kv=kv), logits, slot_ids, active, st, None, num_top)


def decode_forward(params, state: DeviceState, slot_ids, block_tables, active, logits_box=None, *, family, cfg):
    """A decode tick split for structured output, first half: the forward pass only.

    It needs nothing from the host but the batch layout, so it is dispatched before the previous
    tick's tokens are read; the host computes the grammar masks while it runs. Returns the state
    (new KV) and the logits f32 [B, V] that `decode_sample` consumes. `logits_box` (donated, not read) gives
    XLA a buffer to write the logits into (dgjax/runtime/stable_buffers.py).
    """
    del logits_box
    with jax.named_scope("decode_forward"):
        kv, logits = _decode_logits(params, state, slot_ids, block_tables, active, family, cfg)
        return state.replace(kv=kv), logits.astype(jnp.float32)


def decode_sample(state: DeviceState, logits, slot_ids, active, st, bitmask, *, num_top):
    """Second half: sample from `decode_forward`'s logits under the grammar bitmask [B, W]."""
    with jax.named_scope("decode_sample"):
        return _sample_and_advance(state, logits, slot_ids, active, st, bitmask, num_top)


def prefill_chunk(
    params, state: DeviceState, slot, tokens, next_tokens, start_pos, num_valid, block_table,
    is_last, st, bitmask, *, family, cfg, num_top, with_prompt_logprobs,
):
    """Write one chunk of one prompt into the cache; on the last chunk sample the first token.

    `next_tokens[t]` is the prompt token after chunk position t (used only for prompt logprobs).
    `bitmask` [1, W] is the grammar mask of the first token (all ones without a grammar): it is
    known before the prefill runs, so every prefill takes one and no variant is needed.
    """
    with jax.named_scope("prefill_chunk"):
        chunk = tokens.shape[0]
        positions = start_pos + jnp.arange(chunk, dtype=jnp.int32)
        batch = ForwardBatch(
            tokens=tokens[None],
            positions=positions[None],
            query_lens=num_valid[None],
            block_tables=block_table[None],
            context_lens=(start_pos + num_valid)[None],
        )
        hidden, kv = family.forward(params, state.kv, batch, cfg)
        last_hidden = jax.lax.dynamic_index_in_dim(hidden[0], num_valid - 1, keepdims=True)
        logits = family.logits(params, last_hidden, cfg)
        slot_v = slot[None]
        counts = state.output_counts[slot_v]
        res = sampler.sample(
            logits, st, counts, state.prompt_mask[slot_v], jnp.zeros((1,), jnp.int32), num_top,
            bitmask,
        )
        new_counts = sampler.update_counts(counts, res.tokens, is_last[None])

        def keep_or(new, old):
            return jnp.where(is_last, new, old)

        new_state = state.replace(
            kv=kv,
            last_tokens=state.last_tokens.at[slot].set(keep_or(res.tokens[0], state.last_tokens[slot])),
            positions=state.positions.at[slot].set(keep_or(start_pos + num_valid, state.positions[slot])),
            steps=state.steps.at[slot].set(keep_or(1, state.steps[slot])),
            output_counts=state.output_counts.at[slot_v].set(new_counts),
        )
        prompt_lp = None
        if with_prompt_logprobs:
            all_logits = family.logits(params, hidden[0], cfg)
            lsm = jax.nn.log_softmax(all_logits.astype(jnp.float32), axis=-1)
            picked = jnp.take_along_axis(lsm, next_tokens[:, None], axis=-1)[:, 0]
            k = max(num_top, 1)
            top_lp, top_ids = jax.lax.top_k(lsm, k)
            prompt_lp = PromptLogprobs(picked, top_ids[:, :num_top], top_lp[:, :num_top])
        return new_state, (_result(res), prompt_lp)


def init_slot(state: DeviceState, slot, prompt_mask_row):
    """Reset a slot for a new request: its prompt's token set, zero output counts."""
    return state.replace(
        prompt_mask=state.prompt_mask.at[slot].set(prompt_mask_row),
        output_counts=state.output_counts.at[slot].set(0),
        steps=state.steps.at[slot].set(0),
    )


def bind(fn, **static):
    """Close a step function over its static arguments (family, cfg, variant flags)."""
    return functools.partial(fn, **static)
