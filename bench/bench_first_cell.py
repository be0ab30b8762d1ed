"""Time to the first finished cell in a headless run: kernel boot overlapped with the model call.

`prime-agent-lab run` starts the kernel while the model writes its first answer. This compares
that against the sequential order (boot the kernel, then call the model), in the same run, with a
model that takes a fixed time to answer (`--model-latency`, default 0.6 s, a fast real model).

Run: `python bench/bench_first_cell.py [--runs 5]`. Prints the median time from the start of the
run to the first `cell_finished` event for both orders and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from scripted_run import scripted_run  # noqa: E402

from prime_agent_lab.core.messages import ModelRequest  # noqa: E402
from prime_agent_lab.core.ports import ModelProvider  # noqa: E402
from prime_agent_lab.core.settings import Settings  # noqa: E402

SCRIPT = {"turns": [{"code": "print('first cell')"}, {"text": "done"}]}


class SlowModel:
    """Wraps a provider so every call takes `latency` seconds before its first token."""

    def __init__(self, inner: ModelProvider, latency: float) -> None:
        self.inner = inner
        self.latency = latency
        self.name = inner.name
        self.model = inner.model

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        await asyncio.sleep(self.latency)
        async for event in self.inner.stream(request):
            yield event


async def one_run(workdir: Path, latency: float, overlapped: bool) -> float:
    run = scripted_run(workdir, SCRIPT, Settings(), notebook="bench.ipynb", stream=True)
    first_cell = asyncio.get_running_loop().create_future()

    def listen(event: dict[str, Any]) -> None:
        if event["type"] == "cell_finished" and not first_cell.done():
            first_cell.set_result(time.perf_counter())

    start = time.perf_counter()
    await run.start(listen)
    run.agent.provider = SlowModel(run.agent.provider, latency)
    if not overlapped:
        # the sequential order: a ready kernel before the first model call
        await run._kernel._acquire
    turn = asyncio.ensure_future(run.agent.run_turn("go"))
    finished = await first_cell
    await turn
    await run.close()
    return finished - start


async def main(runs: int, latency: float) -> dict[str, float]:
    times: dict[str, list[float]] = {"overlapped": [], "sequential": []}
    for _ in range(runs):
        for order in ("overlapped", "sequential"):
            with tempfile.TemporaryDirectory() as tmp:
                times[order].append(await one_run(Path(tmp), latency, order == "overlapped"))
    return {order: statistics.median(values) for order, values in times.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model-latency", type=float, default=0.6)
    args = parser.parse_args()
    medians = asyncio.run(main(args.runs, args.model_latency))
    print(f"time to first finished cell, median of {args.runs} runs each (s):")
    print(f"  sequential (boot, then model): {medians['sequential']:.3f}")
    print(f"  overlapped (boot during model): {medians['overlapped']:.3f}")
    print(f"  ratio overlapped/sequential: {medians['overlapped'] / medians['sequential']:.2f}")
