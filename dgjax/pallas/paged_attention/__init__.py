"""Paged attention over a page-table KV cache; import the api module, never a backend directly."""

from dgjax.pallas.paged_attention.api import kv_slots, paged_attention, write_kv

__all__ = ["kv_slots", "paged_attention", "write_kv"]
