"""The sub-agent benchmark runs at small size through the real runtime (it must run, not meet a
time): every table it prints is there and its figures are measured, not missing."""

from __future__ import annotations

import re

from .bench_runs import run_bench


def test_subagent_benchmark_smoke_run_prints_all_four_measurements() -> None:
    out = run_bench("bench_subagents.py", "--smoke", timeout=240)
    assert re.search(r"\(a\) admission .* n=2\n    median [\d.]+ ms", out), out
    rows = {line[:22].strip(): line.split() for line in out.splitlines()}
    assert rows["spawn, warm pool"][3] == "2" and len(rows["spawn, warm pool"]) == 11
    assert rows["spawn, pool disabled"][3] == "1"
    assert re.search(r"warm spawn / cold start: [\d.]+", out), out
    assert re.search(r"all 3 replies in the parent's log: [\d.]+ s", out), out
    memory = re.search(
        r"peak (\d+) MiB RSS \((\d+) processes\).* (\d+) MiB RSS, (\d+) MiB PSS", out
    )
    assert memory is not None and int(memory[2]) >= 4  # the host, the root's kernel, children
    assert 0 < int(memory[4]) <= int(memory[3])  # shared pages counted once in PSS
    messages = [line.split() for line in out.splitlines() if line.startswith(("paced", "back"))]
    assert [row[-6] for row in messages] == ["3", "10"]  # messages sent in each run
    assert messages[0][-2] == "3"  # paced: each receipt says delivered (the parent was idle)
    assert all(float(row[-1]) > 0 for row in messages)  # messages per second
