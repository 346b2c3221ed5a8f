"""Where a kernel's warps wait, instruction by instruction, from Nsight Compute's source page.

Why: the aggregate stall reasons (s10f) said the fp8 decode kernels are latency-bound, not at which instruction.
ncu's warp-state sampling per SASS instruction does (session 18: the wait for the first pipeline stage held
25-33% of the GEMVs' samples, the in-step scale load's multiply 4.6-6.6% of glm's). This reads the export of

    ncu --section SourceCounters --section WarpStateStats --warp-sampling-interval 0 -o rep ...
    ncu --import rep.ncu-rep --page source --csv --print-source sass > sass.csv

and prints, per profiled kernel, its share of samples by opcode and its hottest instructions with their leading
stall reasons:

    python3 -m benchmarks.ncu_sass sass.csv[.gz] --top 20
"""

from __future__ import annotations

import argparse
import collections
import csv
import dataclasses
import gzip
import re

SAMPLES = "Warp Stall Sampling (All Samples)"
OPCODE = re.compile(r"\s*(?:@!?U?P\w+\s+)?([A-Z0-9_]+)")


@dataclasses.dataclass
class Kernel:
    name: str
    header: list[str]
    rows: list[list[str]]

    def column(self, name: str) -> int:
        return self.header.index(name)

    def samples(self, row: list[str]) -> float:
        return _number(row[self.column(SAMPLES)])

    @property
    def total(self) -> float:
        return sum(self.samples(r) for r in self.rows)


def _number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read_kernels(path: str) -> list[Kernel]:
    """The kernels of a `--page source --csv` export: each a "Kernel Name" line, then a header row starting
    with "Address" and one row per SASS instruction."""
    opener = gzip.open if path.endswith(".gz") else open
    kernels: list[Kernel] = []
    name = ""
    with opener(path, "rt") as fh:
        for row in csv.reader(fh):
            if not row:
                continue
            if row[0] == "Kernel Name":
                name = row[1] if len(row) > 1 else ""
            elif row[0] == "Address":
                kernels.append(Kernel(name, row, []))
            elif kernels and row[0].startswith("0x"):
                kernels[-1].rows.append(row)
    return kernels


def by_opcode(kernel: Kernel) -> collections.Counter:
    """Sample share of each opcode (predicates and modifiers dropped)."""
    counts: collections.Counter = collections.Counter()
    src = kernel.column("Source")
    for row in kernel.rows:
        m = OPCODE.match(row[src])
        counts[m.group(1) if m else "?"] += kernel.samples(row)
    total = kernel.total or 1.0
    return collections.Counter({op: n / total for op, n in counts.items()})


def hottest(kernel: Kernel, top: int) -> list[tuple[int, float, str, list[tuple[str, float]]]]:
    """(row index, sample share, SASS text, the three leading stall reasons) of the `top` hottest instructions."""
    src, total = kernel.column("Source"), kernel.total or 1.0
    reasons = [i for i, c in enumerate(kernel.header) if c.startswith("stall_") and "(Not" not in c]
    order = sorted(range(len(kernel.rows)), key=lambda i: -kernel.samples(kernel.rows[i]))[:top]
    out = []
    for i in order:
        row = kernel.rows[i]
        lead = sorted(((kernel.header[j], _number(row[j])) for j in reasons), key=lambda t: -t[1])[:3]
        out.append((i, kernel.samples(row) / total, row[src].strip(), [(n, v) for n, v in lead if v]))
    return out


def main(argv=None) -> list[Kernel]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", help="ncu --page source --csv --print-source sass output (.gz allowed)")
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args(argv)
    kernels = read_kernels(args.csv)
    for k in kernels:
        ops = ", ".join(f"{op} {share:.1%}" for op, share in by_opcode(k).most_common(10))
        print(f"\n== {k.name}: {len(k.rows)} instructions, {k.total:.0f} samples; {ops}")
        for i, share, text, lead in hottest(k, args.top):
            print(f"{i:5d} {share:6.1%}  {text[:60]:60s} " + " ".join(f"{n}={v:.0f}" for n, v in lead))
    return kernels


if __name__ == "__main__":
    main()
