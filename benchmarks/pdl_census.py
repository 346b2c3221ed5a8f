"""Where XLA puts Programmatic Dependent Launch (PDL) instructions in the kernels of a compiled decode tick.

Why: XLA (`--xla_gpu_enable_pdl`, on by default in jax 0.10.2) launches kernels with PDL and inserts
`griddepcontrol.wait` at the entry of every kernel it compiles, Pallas-Triton kernels included (session 10,
deviceless compile for the H200): a kernel's CTAs may be scheduled while its predecessor drains, but none of
its loads issues before the predecessor has finished. Session 10's counters say the decode kernels are latency
bound (a launch, one or two memory round trips, a tail, 2-13 µs each); a GEMV whose weight loads (which depend
on nothing earlier) issued before the wait would hide its ramp behind the previous kernel. This census says,
per kernel of a compiled program: whether it waits, how many global loads come before the wait, and whether
it triggers its dependents early (`griddepcontrol.launch_dependents`). Run it on the GPU machine's jax to see
what that XLA does (a later XLA may place waits after independent loads).

    python3 -m benchmarks.pdl_census --out $OUT                 # GPU: compiles a small chain, reads its PTX
    python -m benchmarks.pdl_census --ptx-dir DIR               # any XLA dump (--xla_dump_to) already made
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

from benchmarks.report import write_lines

_ENTRY = re.compile(r"\.entry\s+([A-Za-z0-9_$.]+)\s*\(")


def census(ptx: str) -> list[dict]:
    """One row per kernel entry of a PTX text: name, waits (count), global loads before the first wait,
    triggers (count)."""
    rows = []
    starts = [(m.start(), m.group(1)) for m in _ENTRY.finditer(ptx)]
    for i, (pos, name) in enumerate(starts):
        body = ptx[pos: starts[i + 1][0] if i + 1 < len(starts) else len(ptx)]
        wait = body.find("griddepcontrol.wait")
        head = body if wait < 0 else body[:wait]
        rows.append(dict(
            kernel=name, waits=body.count("griddepcontrol.wait"),
            loads_before_wait=len(re.findall(r"\b(?:ld|cp\.async)\.(?:global|\S*global)", head)) if wait >= 0 else None,
            triggers=body.count("griddepcontrol.launch_dependents"),
        ))
    return rows


def table(rows: list[dict]) -> list[str]:
    out = ["| kernel | waits | global loads before the wait | early triggers |", "| --- | --- | --- | --- |"]
    for r in rows:
        lb = "-" if r["loads_before_wait"] is None else r["loads_before_wait"]
        out.append(f"| `{r['kernel']}` | {r['waits']} | {lb} | {r['triggers']} |")
    return out


_CHAIN = """
import jax, jax.numpy as jnp
from benchmarks import grid_barrier_probe as g
def f(x, w1, w2):
    y = jnp.tanh(x.astype(jnp.float32)).astype(jnp.bfloat16) * 2
    return jnp.sum(g.split_pair(y, w1, w2, programs=128).astype(jnp.float32) ** 2)
s = jax.ShapeDtypeStruct
args = s((2, 2048), jnp.bfloat16), s((4096, 2048), jnp.bfloat16), s((2048, 4096), jnp.bfloat16)
jax.jit(f).trace(*args).lower().compile()
"""


def compile_chain(dump: str, flags: str = "") -> None:
    """Compile a small chain (XLA fusions around two Pallas GEMVs) in a subprocess with its PTX dumped."""
    env = dict(os.environ, XLA_FLAGS=f"{flags} --xla_dump_to={dump}".strip())
    subprocess.run([sys.executable, "-c", _CHAIN], env=env, check=True, cwd=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))


def main(argv=None) -> list[str]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ptx-dir", help="read this XLA dump instead of compiling the chain")
    p.add_argument("--flags", default="", help="extra XLA_FLAGS for the chain's compile")
    p.add_argument("--out")
    a = p.parse_args(argv)
    dump = a.ptx_dir or tempfile.mkdtemp(prefix="pdl-census-")
    if not a.ptx_dir:
        compile_chain(dump, a.flags)
    rows = [r for f in sorted(glob.glob(os.path.join(dump, "*.ptx"))) for r in census(open(f).read())]
    if not rows:  # s11e: jax 0.11.2 on the GPU machine dumped no PTX here; say what it did dump
        kinds = sorted({os.path.splitext(f)[1] or f for f in os.listdir(dump)})
        sys.exit(f"pdl_census: no kernel in {dump}'s *.ptx ({len(os.listdir(dump))} files: {', '.join(kinds)})")
    lines = table(rows)
    print("\n".join(lines))
    write_lines(a.out, "pdl_census.md", lines)
    return lines


if __name__ == "__main__":
    main()
