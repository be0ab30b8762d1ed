"""Rehydration of an evicted sub-agent, against a message to the same sub-agent while resident.

Through `HeadlessRun` in this process (the CLI's runtime, real kernels from the warm pool, the
real bridge, the scripted provider answering at once). A root spawns one child that builds a
namespace (100,000 small dicts and a 10 MB array). Then, alternating, a message goes to the child:

- resident: the child is loaded and idle; time from `mailbox.send` to the end of the child's turn
  (one cell that uses both variables, then an answer);
- evicted: the child was evicted (`lifecycle.evict`: snapshot, kernel shut down, out of memory);
  the same message and the same turn, which now includes reopening the session and notebook,
  taking a pool kernel, and restoring the snapshot. Also the part until the restore notice.

Prints medians and the ratio evicted / resident. Run: `python bench/bench_rehydrate.py [--runs 5]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from scripted_run import scripted_run  # noqa: E402

from prime_agent_lab.core.settings import Settings  # noqa: E402
from prime_agent_lab.headless import HeadlessRun  # noqa: E402

SETUP = (
    "import numpy as np\n"
    "rows = [{'i': i, 'name': f'r{i}'} for i in range(100_000)]\n"
    "array = np.ones(10 * 2**17)\n"
    "print(len(rows))"
)
PROBE = "print(len(rows) + int(array.sum()))"
WAIT = (
    "import asyncio\n"
    "while not [s for s in await rlm.list_subagents() if s.status == 'completed']:\n"
    "    await asyncio.sleep(0.02)"
)


def script(rounds: int) -> dict[str, Any]:
    child = [{"code": SETUP}, {"text": "ready"}]
    for _ in range(rounds):
        child += [{"code": PROBE}, {"text": "{last_output_line}"}]
    root = [{"code": 'c = await rlm("hold data", name="holder")'}, {"code": WAIT}, {"text": "ok"}]
    return {"turns": root, "child": {"turns": child}}


async def until(condition: Callable[[], Any], timeout: float = 120) -> Any:
    deadline = time.perf_counter() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.perf_counter() > deadline:
            raise TimeoutError("the benchmark waited too long")
        await asyncio.sleep(0.005)


async def message_round(
    run: HeadlessRun, parent: Any, child_id: str, turn: int
) -> dict[str, float]:
    runtime = run.runtime

    def ended() -> bool:
        agent = runtime.agents.get(child_id)
        last = agent.session.last_of("turn_end") if agent is not None else None
        return last is not None and last["turn"] == turn

    def restores() -> int:
        session = runtime.repository.read(child_id)
        agent = runtime.agents.get(child_id)
        entries = agent.session.entries if agent is not None else session.entries
        return sum(1 for e in entries if e.get("kind") == "kernel_state_restored")

    before = restores()

    def restored() -> bool:
        return child_id in runtime.agents and restores() > before

    started = time.perf_counter()
    runtime.mailbox.send(parent, "probe", "child", "holder", "auto")
    times: dict[str, float] = {}
    if child_id not in runtime.agents:
        await until(restored)
        times["restored"] = time.perf_counter() - started
    await until(ended)
    times["turn"] = time.perf_counter() - started
    final = runtime.agents[child_id].session.last_of("turn_end")
    if final["final_text"] != "1410720":
        raise RuntimeError(f"the child answered {final['final_text']!r}")
    return times


async def bench(runs: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        run = scripted_run(
            workdir, script(2 * runs), Settings(cell_timeout=120), kernel_pool_size=1
        )
        try:
            await run.start(lambda event: None)
            await run.settle(await run.agent.run_turn("go"))
            runtime, parent = run.runtime, run.agent
            (child_id,) = runtime.descendants(parent.session_id)
            resident: list[float] = []
            evicted: list[float] = []
            restored: list[float] = []
            pool = run.fleet.pool
            turn = 1
            for _ in range(runs):
                turn += 1
                resident.append((await message_round(run, parent, child_id, turn))["turn"])
                await until(lambda: runtime.snapshots.pending_save(child_id) is False)
                if not await runtime.lifecycle.evict(runtime.agents[child_id]):
                    raise RuntimeError("the child was not evicted")
                await until(
                    lambda: pool.ready_count() >= 1 if hasattr(pool, "ready_count") else True
                )
                turn += 1
                times = await message_round(run, parent, child_id, turn)
                evicted.append(times["turn"])
                restored.append(times["restored"])
            manifest = runtime.snapshots.directory(child_id) / "manifest.json"
            size = sum(e["bytes"] for e in json.loads(manifest.read_text())["saved"]) / 2**20
        finally:
            await run.close()
    med = {k: statistics.median(v) * 1000 for k, v in
           {"resident": resident, "evicted": evicted, "restored": restored}.items()}  # fmt: skip
    print(f"runs={runs}  snapshot {size:.1f} MB (100,000 small dicts + a 10 MB array)")
    print("message to the child until its turn ended, median:")
    print(f"  resident           {med['resident']:8.1f} ms")
    print(f"  evicted            {med['evicted']:8.1f} ms")
    print(f"    of which until the restore notice {med['restored']:8.1f} ms")
    print(f"  ratio evicted/resident  {med['evicted'] / med['resident']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(bench(args.runs))


if __name__ == "__main__":
    main()
