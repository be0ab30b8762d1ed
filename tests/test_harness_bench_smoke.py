"""The harness benchmark runs (at small size) and prints every figure it promises."""

from __future__ import annotations

from .bench_runs import run_bench


def test_the_harness_benchmark_runs_and_reports_kernel_calls_and_prompt_costs() -> None:
    out = run_bench("bench_harness.py", "--entries", "20", "--repeat", "3")
    for row in ("| bridge |", "| get |", "| list |", "| update |", "| create |"):
        assert row in out, out
    for row in ("| base |", "| unchanged |", "| changed |"):
        assert row in out, out
