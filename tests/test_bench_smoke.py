"""The end-to-end loop benchmark runs at small size: both paths, both SDKs, streamed and not.

It checks that the benchmark still works against the product (it must run, not meet a time).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_loop_benchmark_smoke_run_prints_its_tables() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), str(ROOT / "kernel_ext"), env.get("PYTHONPATH", "")) if p
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_loop.py"), "--smoke"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=170,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
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
    assert "bare round trip over the whole run" in done.stdout


def test_startup_benchmark_smoke_run_prints_its_table() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), str(ROOT / "kernel_ext"), env.get("PYTHONPATH", "")) if p
    )
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_startup.py"),
            "--runs",
            "1",
            "--providers",
            "openai",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("openai ")]
    assert len(rows) == 1 and len(rows[0]) == 6
    python, sdk_import, floor, cli, ours = map(float, rows[0][1:])
    assert min(python, sdk_import, floor, cli) > 0  # it must run, not meet a time
    assert abs(cli - floor - ours) < 0.002
