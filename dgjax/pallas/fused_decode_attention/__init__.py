"""Fused decode attention: qkv split, q/k norm, rope, K/V append and paged attention in one kernel."""
