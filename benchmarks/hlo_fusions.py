"""What XLA put inside the kernels a trace names: the fused computations from an optimized-HLO dump.

Kernel names in a device trace (`loop_add_fusion_65`, `input_scatter_fusion_37`) say little; the
dump written with XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text holds the instruction of that
name and the computation it calls. Used by profile_decode --hlo-dump to annotate its kernel table.
"""

from __future__ import annotations

import glob
import os
import re


def _modules(dump_dir: str) -> list[str]:
    paths = glob.glob(os.path.join(dump_dir, "*after_optimizations.txt"))
    return [open(p).read() for p in sorted(paths, key=os.path.getsize, reverse=True)]


def _computation(text: str, name: str) -> list[str]:
    m = re.search(rf"^\s*%?{re.escape(name)}\s.*\{{\s*$", text, re.MULTILINE)
    if not m:
        return []
    lines = []
    for line in text[m.start():].splitlines()[1:]:
        if line.strip() == "}":
            break
        lines.append(line.strip())
    return lines


def describe(dump_dir: str, kernel: str, max_lines: int = 14) -> str:
    """The fusion instruction named `kernel` and the ops of its called computation (first match)."""
    for text in _modules(dump_dir):
        m = re.search(rf"^\s*%?{re.escape(kernel)} = (.*)$", text, re.MULTILINE)
        if not m:
            continue
        inst = m.group(1)
        called = re.search(r"calls=%?([\w.\-]+)", inst)
        body = _computation(text, called.group(1)) if called else []
        ops = [re.sub(r"metadata=\{[^}]*\}", "", ln)[:160] for ln in body]
        shown = ops[:max_lines] + ([f"... {len(ops) - max_lines} more"] if len(ops) > max_lines else [])
        return "\n".join([f"{kernel} = {inst[:200]}"] + [f"    {ln}" for ln in shown])
    return f"{kernel}: not found in the dump"
