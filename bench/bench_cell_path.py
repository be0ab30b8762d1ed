"""What the agent adds per cell, measured against a bare jupyter_client round trip in the same run.

For each code sample, the two paths alternate on the same kernel (A, B, A, B, ...) so machine
noise hits both alike:

- baseline: `execute_interactive(code)` on a plain `AsyncKernelClient` (its own client);
- agent path: one `python` tool call through the real loop code, from the model's tool call to
  the observation recorded: parse the call, append a tagged cell to a live jupyter_ydoc notebook,
  execute on the kernel through the agent's executor, stream outputs into the shared cell, build
  the capped observation, append to the JSONL session log, emit events.

Run: `python bench/bench_cell_path.py [--runs 200]`. Prints medians, p95 and the added median per
sample, and the ratio agent/baseline. The goal is at most 15 ms added per cell (median).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from jupyter_ydoc import YNotebook

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from prime_agent_lab.adapters.kernel_executor import KernelExecutor  # noqa: E402
from prime_agent_lab.core.agent import Agent  # noqa: E402
from prime_agent_lab.core.messages import ToolCall  # noqa: E402
from prime_agent_lab.core.sessions import SessionRepository  # noqa: E402
from prime_agent_lab.core.settings import Settings  # noqa: E402
from prime_agent_lab.jupyter.live_notebook import LiveNotebook  # noqa: E402
from prime_agent_lab.providers import make_provider  # noqa: E402

SAMPLES = {
    "assign": "x = 10 + 25 ** 2",
    "print": "print('hi')",
    "print 100 KB": "print('y' * 100_000)",
}


class InMemoryRoom:
    """Stands in for the collaboration extension: hands out one live YNotebook."""

    def __init__(self) -> None:
        self.doc = YNotebook()

    async def get_document(self, **_: Any) -> YNotebook:
        return self.doc


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(runs: int) -> dict[str, Any]:
    km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel()
    baseline = km.client()
    baseline.start_channels()
    await baseline.wait_for_ready(timeout=60)
    executor = KernelExecutor(km, "bench")
    with tempfile.TemporaryDirectory() as tmp:
        session = SessionRepository(Path(tmp)).create(notebook_path="bench.ipynb")
        notebook = LiveNotebook(InMemoryRoom(), "bench.ipynb", output_cap=10_000_000)
        agent = Agent(session, make_provider("scripted", None), notebook, executor, Settings())
        report: dict[str, Any] = {}
        for label, code in SAMPLES.items():
            call = ToolCall("bench", "python", json.dumps({"code": code}))
            for _ in range(10):  # warm both paths
                await baseline.execute_interactive(code, output_hook=lambda m: None, timeout=30)
                await agent._run_tool_call(1, call)
            bare: list[float] = []
            full: list[float] = []
            for _ in range(runs):
                start = time.perf_counter()
                await baseline.execute_interactive(code, output_hook=lambda m: None, timeout=30)
                bare.append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                await agent._run_tool_call(1, call)
                full.append((time.perf_counter() - start) * 1000)
            added = [f - b for f, b in zip(full, bare, strict=True)]
            report[label] = {
                "baseline_median_ms": statistics.median(bare),
                "baseline_p95_ms": percentile(bare, 0.95),
                "agent_median_ms": statistics.median(full),
                "agent_p95_ms": percentile(full, 0.95),
                "added_median_ms": statistics.median(full) - statistics.median(bare),
                "added_paired_median_ms": statistics.median(added),
                "ratio": statistics.median(full) / statistics.median(bare),
            }
    baseline.stop_channels()
    await executor.close()
    await km.shutdown_kernel(now=True)
    return report


def render(report: dict[str, Any], runs: int) -> str:
    lines = [
        f"per-cell path, {runs} alternating runs per sample (ms)",
        f"{'sample':<14}{'bare med':>10}{'bare p95':>10}{'agent med':>11}{'agent p95':>11}"
        f"{'added med':>11}{'ratio':>8}",
    ]
    for label, r in report.items():
        lines.append(
            f"{label:<14}{r['baseline_median_ms']:>10.2f}{r['baseline_p95_ms']:>10.2f}"
            f"{r['agent_median_ms']:>11.2f}{r['agent_p95_ms']:>11.2f}"
            f"{r['added_paired_median_ms']:>11.2f}{r['ratio']:>8.2f}"
        )
    worst = max(r["added_paired_median_ms"] for r in report.values())
    lines.append(f"worst added median: {worst:.2f} ms (goal: <= 15 ms)")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the raw report as JSON")
    args = parser.parse_args()
    result = asyncio.run(main(args.runs))
    print(json.dumps(result, indent=2) if args.json else render(result, args.runs))
