"""Where the greedy tokens of decode_bench runs part: per decode case and stream, the first generated position at
which each run differs from the first one given.

Why: runs of one seed and preset decode the same prompts, so an A/B's arms should print the same `greedy_sha1`.
When they do not, this says how: a race or a wrong buffer in one arm garbles tokens from the first positions
on, while a different rounding path (another GEMM split, a routing weight 1e-7 apart) agrees for a while and
then drifts where two logits were nearly tied.

    python -m benchmarks.greedy_diff out/q_1/*.json out/q_cc_1/*.json
"""

from __future__ import annotations

import argparse
import json


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first index where the two id lists differ (the shorter one's length if one is a prefix); None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare(runs: list[dict]) -> list[dict]:
    """One row per (later run, decode case): the first differing position of each stream, None where equal."""
    base = {(d["context"], d["concurrency"]): d for d in runs[0]["decode"]}
    rows = []
    for k, run in enumerate(runs[1:], start=1):
        for d in run["decode"]:
            ref = base.get((d["context"], d["concurrency"]))
            if ref is None or "greedy_tokens" not in d or "greedy_tokens" not in ref:
                continue
            rows.append({"run": k, "context": d["context"], "streams": d["concurrency"],
                         "tokens": len(d["greedy_tokens"][0]) if d["greedy_tokens"] else 0,
                         "first_difference": [first_difference(a, b)
                                              for a, b in zip(ref["greedy_tokens"], d["greedy_tokens"])]})
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", help="decode_bench .json files; the first is the reference")
    args = p.parse_args(argv)
    runs = []
    for path in args.results:
        with open(path) as fh:
            runs.append(json.load(fh))
    rows = compare(runs)
    for r in rows:
        diffs = ", ".join("same" if x is None else f"from {x}" for x in r["first_difference"])
        print(f"{args.results[r['run']]}: context {r['context']} x {r['streams']} ({r['tokens']} tokens a stream): {diffs}")
    return rows


if __name__ == "__main__":
    main()
