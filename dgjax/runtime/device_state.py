"""Everything the device keeps between engine steps, as one donated pytree.

Per decode slot the device remembers the last sampled token, the next position to write, how many
tokens were generated (it seeds the in-graph RNG) and the counts the penalties need. Keeping these on
the device is what lets tick N+1 be dispatched before tick N's tokens reach the host.
Slot `num_slots` (the last row) is the padding slot: padded batch rows read and write it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from dgjax.models.batch import KVCache


@struct.dataclass
class DeviceState:
    kv: KVCache
    last_tokens: jax.Array  # int32 [S+1]
    positions: jax.Array  # int32 [S+1]: position the next fed token is written at
    steps: jax.Array  # int32 [S+1]: tokens generated so far (RNG stream index)
    output_counts: jax.Array  # int32 [S+1, V]
    prompt_mask: jax.Array  # bool [S+1, V]


def slot_arrays_shapes(num_slots: int, vocab: int) -> dict[str, jax.ShapeDtypeStruct]:
    rows = num_slots + 1
    return {
        "last_tokens": jax.ShapeDtypeStruct((rows,), jnp.int32),
        "positions": jax.ShapeDtypeStruct((rows,), jnp.int32),
        "steps": jax.ShapeDtypeStruct((rows,), jnp.int32),
        "output_counts": jax.ShapeDtypeStruct((rows, vocab), jnp.int32),
        "prompt_mask": jax.ShapeDtypeStruct((rows, vocab), jnp.bool_),
    }


def create_device_state(kv: KVCache, num_slots: int, vocab: int, sharding) -> DeviceState:
    """Zero slot arrays (replicated by `sharding`) around an already-created KV cache."""
    arrays = {
        name: jax.device_put(jnp.zeros(s.shape, s.dtype), sharding)
        for name, s in slot_arrays_shapes(num_slots, vocab).items()
    }
    return DeviceState(kv=kv, **arrays)
