"""How often XLA re-recorded a run's CUDA graphs, read from its command-buffer log.

Why: XLA re-records a whole command buffer whenever a buffer it captured moved since its last run, at host
cost on every such tick (s15d: qwen3-30b-a3b fp8's 792-command decode graph after every tick, 360-830 µs each;
benchmarks/results/2026-12-02-s15-graph-scheduling-and-updates.md). Run the process with
`TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=command_buffer_thunk=3`, then:

    python -m benchmarks.graph_updates RUN.log

prints, for the largest graph (the decode tick's), how many updates, how many allocations each changed, and
the median host time of one update, then the count over all graphs.
"""

from __future__ import annotations

import collections
import re
import statistics
import sys

UPDATE = re.compile(r"command buffer cmd sequence after \d+ executions since last update"
                    r"; num_commands=(\d+); updated_allocs=(\d+)")
TOOK = re.compile(r"Updated command buffer in (\d+) \S+; num_commands=(\d+)")


def summarize(text: str) -> str:
    ups = [(int(n), int(a)) for n, a in UPDATE.findall(text)]
    took = [(int(n), int(t)) for t, n in TOOK.findall(text)]
    big = max((n for n, _ in ups), default=0)
    changed = [a for n, a in ups if n == big]
    us = [t for n, t in took if n == big]
    median = statistics.median(us) if us else "-"
    return (f"   largest graph {big} commands: {len(changed)} updates, allocs changed "
            f"{collections.Counter(changed).most_common(4)}, update us median {median}; "
            f"all graphs: {len(ups)} updates")


if __name__ == "__main__":
    with open(sys.argv[1], errors="replace") as f:
        print(summarize(f.read()))
