"""The compaction and history benchmarks run at small size (they must run, not meet a time)."""

from __future__ import annotations

from .bench_runs import run_bench


def test_the_compaction_benchmark_keeps_the_prompt_under_the_window() -> None:
    out = run_bench("bench_compaction.py", "--turns", "40", "--window", "3000")
    assert "| max |" in out
    assert "compactions: 0;" not in out


def test_the_history_benchmark_prints_its_table() -> None:
    out = run_bench("bench_history.py", "--entries", "500", "--repeat", "3")
    assert "| len |" in out and "| full |" in out
