"""A sub-agent's kernel from the warm pool vs a cold kernel start, to the first executed cell.

Both orders are measured in the same run, alternating, on the same machine:

- warm: `take()` from a filled `KernelPool` (size 1), hand the kernel to the child (its working
  directory; on the server also its Jupyter session), connect the agent's executor (which loads
  the kernel package) and run the first cell. The pool starts its replacement meanwhile, as it
  does in use, so that boot shares the cores with the measured path.
- cold: start a kernel for the child (local: `AsyncKernelManager.start_kernel`; server:
  `session_manager.create_session`, as the host does today), connect the executor and run the
  first cell.

`--mode local` uses the CLI's kernels (`LocalKernels`, `hand_out`); `--mode server` uses
jupyter_server's kernel, session and contents managers in this process (`ServerKernels`,
`hand_to_notebook`), without the HTTP layer. Run: `python bench/bench_kernel_pool.py [--runs 7]`.
Prints the median of each order and the ratio warm/cold (the issue's goal for a whole spawn: at
most 0.2).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from jupyter_client.manager import AsyncKernelManager  # noqa: E402

from prime_agent_lab.adapters.kernel_executor import (  # noqa: E402
    KernelExecutor,
    bridge_setup_code,
)
from prime_agent_lab.adapters.kernel_pool import KernelPool  # noqa: E402
from prime_agent_lab.adapters.local_kernels import (  # noqa: E402
    LocalKernel,
    LocalKernels,
    hand_out,
    kernel_spec_manager,
)
from prime_agent_lab.core.redaction import kernel_environment  # noqa: E402
from prime_agent_lab.jupyter.server_kernels import ServerKernels, hand_to_notebook  # noqa: E402

BRIDGE = "http://127.0.0.1:9/prime-agent/bridge"  # never called: the first cell does not use it
FIRST_CELL = "x = 6 * 7\nprint(x)"


class Stages:
    """Wall-clock marks of one spawn: `mark(name)` ends the stage `name`."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.times: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.times[name] = now - self.last
        self.last = now

    @property
    def total(self) -> float:
        return self.last - self.start


async def first_cell(manager: Any, kernel_id: str, stages: Stages) -> None:
    """The agent's executor runs the first cell: it connects, loads the kernel package, runs."""
    executor = KernelExecutor(manager, kernel_id, lambda: bridge_setup_code(BRIDGE, kernel_id))
    try:
        result = await executor.execute(FIRST_CELL, lambda event: None, 60)
        stages.mark("first cell")
    finally:
        await executor.close()
    if result.status != "ok" or result.outputs[0].get("text") != "42\n":
        raise RuntimeError(f"the first cell did not run: {result}")


async def until_full(pool: KernelPool[Any]) -> None:
    while pool.stats().ready < pool.size:
        await asyncio.sleep(0.02)


Release = Callable[[], Awaitable[Any]]


class LocalBench:
    def __init__(self, workdir: Path) -> None:
        self.child_dir = workdir / "analysis.agents"
        self.child_dir.mkdir()
        self.source = LocalKernels("python3", cwd=workdir)
        self.pool: KernelPool[LocalKernel] = KernelPool(
            self.source.start, self.source.discard, size=1, alive=self.source.alive
        )
        self._specs = kernel_spec_manager()

    async def warm(self) -> tuple[Stages, Release]:
        stages = Stages()
        kernel = await self.pool.take()
        stages.mark("take")
        await hand_out(kernel, self.child_dir)
        stages.mark("hand-out")
        await first_cell(kernel.manager, kernel.kernel_id, stages)
        return stages, lambda: self.source.discard(kernel)

    async def cold(self) -> tuple[Stages, Release]:
        stages = Stages()
        manager = AsyncKernelManager(kernel_name="python3", kernel_spec_manager=self._specs)
        await manager.start_kernel(cwd=str(self.child_dir), env=kernel_environment())
        stages.mark("start")
        await first_cell(manager, "cold", stages)
        return stages, lambda: manager.shutdown_kernel(now=True)


class ServerBench:
    def __init__(self, workdir: Path) -> None:
        from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
        from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
        from jupyter_server.services.sessions.sessionmanager import SessionManager

        (workdir / "analysis.agents").mkdir()
        contents = AsyncLargeFileManager(root_dir=str(workdir))
        kernels = AsyncMappingKernelManager(root_dir=str(workdir))
        sessions = SessionManager(kernel_manager=kernels, contents_manager=contents)
        self.server = SimpleNamespace(
            kernel_manager=kernels, session_manager=sessions, contents_manager=contents
        )
        self.source = ServerKernels(self.server, "python3")
        self.pool: KernelPool[str] = KernelPool(
            self.source.start, self.source.discard, size=1, alive=self.source.alive
        )
        self.children = 0

    def _child_path(self) -> str:
        self.children += 1
        return f"analysis.agents/child-{self.children}.ipynb"

    async def _release(self, kernel_id: str) -> None:
        sessions = self.server.session_manager
        for session in await sessions.list_sessions():
            if session["kernel"]["id"] == kernel_id:
                await sessions.delete_session(session["id"])

    async def warm(self) -> tuple[Stages, Release]:
        stages = Stages()
        kernel_id = await self.pool.take()
        stages.mark("take")
        await hand_to_notebook(self.server, kernel_id, self._child_path())
        stages.mark("hand-out")
        await first_cell(self.server.kernel_manager.get_kernel(kernel_id), kernel_id, stages)
        return stages, lambda: self._release(kernel_id)

    async def cold(self) -> tuple[Stages, Release]:
        stages = Stages()
        path = self._child_path()
        model = await self.server.session_manager.create_session(
            path=path, name=path.rsplit("/", 1)[1], type="notebook", kernel_name="python3"
        )
        kernel_id = str(model["kernel"]["id"])
        stages.mark("start")
        await first_cell(self.server.kernel_manager.get_kernel(kernel_id), kernel_id, stages)
        return stages, lambda: self._release(kernel_id)


async def measure(mode: str, runs: int) -> dict[str, list[Stages]]:
    spawns: dict[str, list[Stages]] = {"warm": [], "cold": []}
    with tempfile.TemporaryDirectory() as tmp:
        bench = LocalBench(Path(tmp)) if mode == "local" else ServerBench(Path(tmp))
        bench.pool.fill()
        try:
            for _ in range(runs):
                for order in ("warm", "cold"):
                    await until_full(bench.pool)  # nothing boots in the background at the start
                    stages, release = await (bench.warm() if order == "warm" else bench.cold())
                    spawns[order].append(stages)
                    await release()
        finally:
            await bench.pool.close()
    return spawns


def median_ms(spawns: list[Stages], stage: str | None = None) -> float:
    values = [s.total if stage is None else s.times[stage] for s in spawns]
    return statistics.median(values) * 1000


def report(mode: str, spawns: dict[str, list[Stages]]) -> str:
    warm, cold = median_ms(spawns["warm"]), median_ms(spawns["cold"])
    return f"{mode:<7} {warm:>9.1f} {cold:>11.1f} {warm / cold:>10.2f}"


def breakdown(mode: str, order: str, spawns: list[Stages]) -> str:
    parts = ", ".join(f"{name} {median_ms(spawns, name):.1f}" for name in spawns[0].times)
    return f"  {mode} {order}: {parts}"


async def main(modes: list[str], runs: int) -> dict[str, dict[str, list[Stages]]]:
    return {mode: await measure(mode, runs) for mode in modes}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--mode", default="local,server", help="local, server or both")
    args = parser.parse_args()
    results = asyncio.run(main([m.strip() for m in args.mode.split(",")], args.runs))
    print(f"spawn to first executed cell, median of {args.runs} runs each (ms)")
    print("mode    warm pool  cold start  warm/cold")
    for mode, spawns in results.items():
        print(report(mode, spawns))
    print("stages (median ms):")
    for mode, spawns in results.items():
        for order in ("warm", "cold"):
            print(breakdown(mode, order, spawns[order]))
