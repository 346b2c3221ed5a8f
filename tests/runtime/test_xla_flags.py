"""dgjax's default XLA flags: added to XLA_FLAGS on import unless the user set the same flag or opted out."""

from __future__ import annotations

import os
import subprocess
import sys

from dgjax import xla_flags


def test_defaults_are_added_without_overriding_the_user():
    assert xla_flags.with_defaults("") == "--xla_gpu_graph_min_graph_size=1"
    assert xla_flags.with_defaults("--xla_dump_to=/tmp/d") == "--xla_dump_to=/tmp/d --xla_gpu_graph_min_graph_size=1"
    assert xla_flags.with_defaults("--xla_gpu_graph_min_graph_size=7") == "--xla_gpu_graph_min_graph_size=7"


def _flags_after_import(env: dict) -> str:
    code = "import dgjax, os, jax; jax.devices(); print(os.environ.get('XLA_FLAGS', ''))"
    full = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", xla_flags.ENV)} | env
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_sets_the_flags_before_the_backend_starts_and_respects_opt_out():
    # the CPU backend accepts the GPU flag (XLA parses every debug option), so the process starts with it
    assert _flags_after_import({}) == "--xla_gpu_graph_min_graph_size=1"
    assert _flags_after_import({xla_flags.ENV: "0"}) == ""
    assert _flags_after_import({"XLA_FLAGS": "--xla_gpu_graph_min_graph_size=3"}) == "--xla_gpu_graph_min_graph_size=3"
