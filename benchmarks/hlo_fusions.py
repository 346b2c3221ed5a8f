"""What XLA put inside the kernels a trace names: the fused computations from an optimized-HLO dump.

Kernel names in a device trace (`loop_add_fusion_65`, `input_scatter_fusion_37`) say little; the
dump written with XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text holds the instruction of that
name and the computation it calls. Used by profile_decode --hlo-dump to annotate its kernel table.
"""

from __future__ import annotations

import glob
import os
import re


def _modules(dump_dir: str, prefer: str = "") -> list[str]:
    """Optimized modules, those whose file name contains `prefer` first, then the largest first."""
    paths = glob.glob(os.path.join(dump_dir, "*after_optimizations.txt"))
    order = lambda p: (prefer not in os.path.basename(p), -os.path.getsize(p))  # noqa: E731
    return [open(p).read() for p in sorted(paths, key=order)]


def hlo_names(kernel: str) -> list[str]:
    """Names the HLO may use for a trace's kernel: traces write `fusion_12` for `fusion.12`."""
    dotted = re.sub(r"_(\d+)$", r".\1", kernel)
    return [kernel] if dotted == kernel else [kernel, dotted]


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


def describe(dump_dir: str, kernel: str, max_lines: int = 14, prefer: str = "") -> str:
    """The fusion instruction named `kernel` and the ops of its called computation (first match,
    modules named like `prefer` first)."""
    for text in _modules(dump_dir, prefer):
        m = None
        for name in hlo_names(kernel):
            m = m or re.search(rf"^\s*%?{re.escape(name)} = (.*)$", text, re.MULTILINE)
        if not m:
            continue
        inst = m.group(1)
        called = re.search(r"calls=%?([\w.\-]+)", inst)
        body = _computation(text, called.group(1)) if called else []
        ops = [re.sub(r"metadata=\{[^}]*\}", "", ln)[:160] for ln in body]
        shown = ops[:max_lines] + ([f"... {len(ops) - max_lines} more"] if len(ops) > max_lines else [])
        return "\n".join([f"{kernel} = {inst[:200]}"] + [f"    {ln}" for ln in shown])
    return f"{kernel}: not found in the dump"
