"""Merge of split-K decode attention partials in one kernel; import the api module, never a backend directly."""

from dgjax.pallas.split_merge.api import merge_splits

__all__ = ["merge_splits"]
