"""The compaction and history benchmarks run at small size (they must run, not meet a time)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_bench(name: str, *args: str) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), str(ROOT / "kernel_ext"), env.get("PYTHONPATH", "")) if p
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_compaction_benchmark_keeps_the_prompt_under_the_window() -> None:
    out = run_bench("bench_compaction.py", "--turns", "40", "--window", "3000")
    assert "| max |" in out
    assert "compactions: 0;" not in out


def test_the_history_benchmark_prints_its_table() -> None:
    out = run_bench("bench_history.py", "--entries", "500", "--repeat", "3")
    assert "| len |" in out and "| full |" in out
