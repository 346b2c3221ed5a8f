"""Merge of split-K decode attention partials in one kernel; import the api module, never a backend directly."""

from dgjax.pallas.split_merge.api import MAX_KERNEL_ROWS, merge_for_attention

__all__ = ["MAX_KERNEL_ROWS", "merge_for_attention"]
