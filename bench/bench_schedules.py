"""Heartbeats and schedules (issue 17): what an idle schedule costs, and how late a tick is.

(a) Idle cost. A child process runs the CLI's runtime (`HeadlessRun`: a real kernel, the scripted
provider) with its root agent attached and holds N active heartbeats, one per sub-agent session
of the root (`every 1h`: none is due during the window). After a settling second it measures its
own CPU time (`time.process_time`, the kernel is another process) over a wall-clock window, and
counts the scheduler's wakes. N = 100 against N = 0 (the same runtime, no heartbeats: the
baseline), alternating, `--rounds` each; CPU seconds per hour = CPU in the window scaled to an
hour. The timer sleeps until the earliest due time, at most `WATCH_SECONDS` (5 s), when it stats
one stamp file for changes other processes made.

(b) Delay from a tick's due time to the agent's turn starting: one `HeadlessRun` in this process,
the root's heartbeat is set due 0.25 s ahead, `--ticks` times (each after the previous turn
ended); per tick the time from the due time to the `heartbeat` `claimed` event, and to the
`turn_started` event of the turn the tick opened. Median and p95.

Run: `python bench/bench_schedules.py [--window 20] [--rounds 2] [--heartbeats 100]
[--ticks 20]`; `--smoke` runs a 2 s window and 3 ticks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from scripted_run import scripted_run  # noqa: E402

from prime_agent_lab.core.events import Event  # noqa: E402
from prime_agent_lab.core.schedule_grammar import parse  # noqa: E402
from prime_agent_lab.core.schedules import iso, new_job  # noqa: E402
from prime_agent_lab.core.settings import Settings  # noqa: E402
from prime_agent_lab.headless import HeadlessRun  # noqa: E402

SCRIPT = {"turns": [{"text": "ok"}], "restart_each_message": True}


def headless(workdir: Path) -> HeadlessRun:
    return scripted_run(workdir, SCRIPT, Settings(cell_timeout=120), kernel_pool_size=0)


# ---------------------------------------------------------------- (a) idle cost, in a child


async def idle_child(heartbeats: int, window: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        run = headless(Path(directory))
        try:
            await run.start(lambda event: None)
            runtime, root = run.runtime, run.agent
            now = datetime.now(UTC)
            for n in range(heartbeats):
                child = runtime.repository.create(
                    notebook_path=f"analysis.agents/w{n}.ipynb",
                    parent_session_id=root.session_id,
                    name=f"w{n}",
                    depth=1,
                )
                runtime.family.refresh()
                job = new_job("agent", f"check {n}", parse("every 1h", now), now)
                runtime.scheduler.store(child.session_id).add(job)
                runtime.scheduler.changed(child.session_id)
            await asyncio.sleep(1.0)  # settle: the kernel's start, the first wake
            wakes = runtime.scheduler.wakes
            cpu, wall = time.process_time(), time.perf_counter()
            await asyncio.sleep(window)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            return {
                "heartbeats": heartbeats,
                "pinned": runtime.scheduler.active_sessions,
                "cpu": cpu,
                "wall": wall,
                "wakes": runtime.scheduler.wakes - wakes,
            }
        finally:
            await run.close()


def measure_idle(heartbeats: int, window: float) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--idle-child", str(heartbeats), "--window", str(window)],
        capture_output=True,
        text=True,
        timeout=window + 120,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stdout + done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def idle_cost(heartbeats: int, window: float, rounds: int) -> None:
    results: dict[int, list[dict[str, Any]]] = {0: [], heartbeats: []}
    for _ in range(rounds):
        for count in (0, heartbeats):
            results[count].append(measure_idle(count, window))
    print(f"(a) idle cost over a {window:g} s window, {rounds} round(s), alternating")
    print("heartbeats  pinned  cpu s/hour (median)  wakes per minute")
    per_hour = {}
    for count, runs in results.items():
        hours = [r["cpu"] * 3600 / r["wall"] for r in runs]
        wakes = [r["wakes"] * 60 / r["wall"] for r in runs]
        per_hour[count] = statistics.median(hours)
        pinned = runs[-1]["pinned"]
        print(
            f"{count:>10}  {pinned:>6}  {per_hour[count]:>19.2f}  {statistics.median(wakes):>16.1f}"
        )
    base = per_hour[0]
    ratio = per_hour[heartbeats] / base if base else float("nan")
    print(f"ratio {heartbeats} / 0 heartbeats: {ratio:.2f}")


# ---------------------------------------------------------------- (b) tick delay


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def tick_delay(ticks: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        run = headless(Path(directory))
        stamps: dict[str, float] = {}

        def listen(event: Event) -> None:
            if event["type"] == "heartbeat" and event["phase"] == "claimed":
                stamps["claimed"] = time.time()
            elif event["type"] == "turn_started" and event.get("schedule_id"):
                stamps["turn"] = time.time()

        try:
            await run.start(listen)
            runtime, agent = run.runtime, run.agent
            scheduler = runtime.scheduler
            store = scheduler.store(agent.session_id)
            now = datetime.now(UTC)
            job = store.add(new_job("user", "check", parse("every 1h", now), now))
            to_claim: list[float] = []
            to_turn: list[float] = []
            for _ in range(ticks):
                stamps.clear()
                due = datetime.now(UTC) + timedelta(seconds=0.25)

                def set_due(entry: dict[str, Any], due: datetime = due) -> None:
                    entry["next_run_at"] = iso(due)

                store.update(job["id"], set_due, datetime.now(UTC))
                scheduler.changed(agent.session_id)
                deadline = time.perf_counter() + 60
                while "turn" not in stamps or agent.running:
                    if time.perf_counter() > deadline:
                        raise TimeoutError("no turn from the tick")
                    await asyncio.sleep(0.01)
                to_claim.append(stamps["claimed"] - due.timestamp())
                to_turn.append(stamps["turn"] - due.timestamp())
        finally:
            await run.close()
    print(f"(b) due time to the tick's turn, {ticks} ticks (real runtime, scripted provider)")
    print("                     median ms   p95 ms")
    for name, values in (("due -> claimed", to_claim), ("due -> turn_started", to_turn)):
        median, p95 = statistics.median(values) * 1000, quantile(values, 0.95) * 1000
        print(f"{name:<20} {median:>10.1f} {p95:>8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--heartbeats", type=int, default=100)
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--idle-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.idle_child is not None:
        print(json.dumps(asyncio.run(idle_child(args.idle_child, args.window))))
        return
    if args.smoke:
        args.window, args.rounds, args.ticks = 2.0, 1, 3
    idle_cost(args.heartbeats, args.window, args.rounds)
    asyncio.run(tick_delay(args.ticks))


if __name__ == "__main__":
    main()
