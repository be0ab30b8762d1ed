"""The end-to-end loop benchmark runs at small size: both paths, both SDKs, streamed and not.

It checks that the benchmark still works against the product (it must run, not meet a time).
"""

from __future__ import annotations

from .bench_runs import run_bench


def test_loop_benchmark_smoke_run_prints_its_tables() -> None:
    out = run_bench("bench_loop.py", "--smoke")
    lines = out.splitlines()
    assert any(line.startswith("path      provider   stream  context  cells") for line in lines)
    assert any(line.startswith("provider   stream  start->1st request") for line in lines)
    rows = [line.split() for line in lines if line.startswith(("headless ", "server "))]
    measured = {(row[0], row[1], row[2], row[3]) for row in rows}
    assert measured == {
        ("headless", "openai", "on", "0"),
        ("headless", "openai", "on", "2"),
        ("server", "anthropic", "off", "0"),
        ("server", "anthropic", "off", "2"),
    }
    assert "bare round trip over the whole run" in out


def test_startup_benchmark_smoke_run_prints_its_table() -> None:
    out = run_bench("bench_startup.py", "--runs", "1", "--providers", "openai", timeout=120)
    rows = [line.split() for line in out.splitlines() if line.startswith("openai ")]
    assert len(rows) == 1 and len(rows[0]) == 6
    python, sdk_import, floor, cli, ours = map(float, rows[0][1:])
    assert min(python, sdk_import, floor, cli) > 0  # it must run, not meet a time
    assert abs(cli - floor - ours) < 0.002


def test_schedules_benchmark_smoke_run_prints_its_tables() -> None:
    out = run_bench("bench_schedules.py", "--smoke", timeout=170)
    rows = {
        line.split()[0]: line.split() for line in out.splitlines() if line[:10].strip().isdigit()
    }
    assert set(rows) == {"0", "100"} and rows["100"][1] == "100"  # every heartbeat pins its agent
    assert "ratio 100 / 0 heartbeats:" in out
    delays = [line for line in out.splitlines() if line.startswith("due -> ")]
    assert [line.split("  ")[0] for line in delays] == ["due -> claimed", "due -> turn_started"]
