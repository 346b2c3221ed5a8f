"""benchmarks.graph_updates reads XLA's command-buffer log lines (the format jax 0.11.2's XLA writes)."""

from __future__ import annotations

from benchmarks.graph_updates import summarize

HEAD = "I1202 16:16:06.257982    2792 command_buffer_thunk.cc:{}] [0] "


def _update(commands: int, allocs: int, us: int) -> str:
    return (HEAD.format(336) + "Create/Update command buffer by recoding command buffer cmd sequence after 1 "
            f"executions since last update; num_commands={commands}; updated_allocs={allocs}; "
            "is_first_record=false; needs_update=true\n"
            + HEAD.format(362) + f"Updated command buffer in {us} μs; num_commands={commands}\n"
            + HEAD.format(371) + "Execute command buffer; num_executions=1\n")


def test_counts_the_largest_graph_and_its_changed_allocations():
    log = (_update(792, 2, 400) + _update(4, 3, 15) + _update(792, 2, 600) + _update(792, 5, 500)
           + HEAD.format(371) + "Execute command buffer; num_executions=2\n")
    line = summarize(log)
    assert "largest graph 792 commands: 3 updates" in line
    assert "allocs changed [(2, 2), (5, 1)]" in line
    assert "update us median 500" in line and "all graphs: 4 updates" in line


def test_a_log_without_updates_says_so():
    assert "0 updates" in summarize(HEAD.format(371) + "Execute command buffer; num_executions=7\n")
