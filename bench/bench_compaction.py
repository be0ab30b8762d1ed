"""Prompt tokens per turn over a long scripted session whose data grows in a kernel variable.

Each of `--turns` turns runs one cell that appends 1,000 numbers to `data` (the variable grows to
`turns * 1,000` items) and prints a short line about it, then answers in text. The prompt tokens
of each turn's first model call (what the scripted provider reports: the request's characters
divided by four, system prompt included) are recorded, in the same run:

- compaction: with a context window of `--window` tokens (compaction at window minus a quarter);
- baseline: the same session without compaction (the context keeps every turn).

The data never enters the prompt either way (it lives in the variable); without compaction the
prompt still grows with the number of turns, with compaction it stays under the window.

Run: `python bench/bench_compaction.py [--turns 200] [--window 8000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from prime_agent_lab.core.settings import Settings  # noqa: E402
from prime_agent_lab.headless import HeadlessRun  # noqa: E402

CELL = (
    "data = globals().get('data', [])\n"
    "data.extend(range(len(data), len(data) + 1000))\n"
    "print(f'data has {len(data):,} items; the last is {data[-1]:,}')"
)


def script(directory: Path, turns: int) -> str:
    steps: list[dict[str, Any]] = []
    for turn in range(turns):
        steps += [{"code": CELL}, {"text": f"Turn {turn + 1}: {{last_output_line}}"}]
    path = directory / "script.json"
    path.write_text(json.dumps({"turns": steps}), encoding="utf-8")
    return str(path)


async def session(turns: int, window: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        config = Settings(
            cell_timeout=60,
            context_window=window or 10_000_000,
            compaction_enabled=window is not None,
            compaction_reserve_tokens=(window or 0) // 4,
            compaction_keep_recent_tokens=(window or 0) // 4,
        )
        run = HeadlessRun(
            cwd=root,
            notebook="analysis.ipynb",
            provider="scripted",
            model=None,
            script_path=script(root, turns),
            stream=False,
            kernel_name="python3",
            settings=config,
            kernel_pool_size=0,
        )
        await run.start(lambda event: None)
        start = time.perf_counter()
        try:
            for turn in range(turns):
                outcome = await run.agent.run_turn(f"step {turn + 1}")
                if outcome.stop_reason != "end_turn":
                    raise SystemExit(f"turn {turn + 1} ended with {outcome}")
        finally:
            await run.close()
        seconds = time.perf_counter() - start
        entries = run.agent.session.entries
        firsts: dict[int, int] = {}
        for entry in entries:
            if entry["type"] == "assistant_message" and entry.get("turn") not in firsts:
                firsts[entry["turn"]] = entry["usage"]["input_tokens"]
        compactions = sum(1 for e in entries if e["type"] == "compaction")
        return {
            "prompt": [firsts[t] for t in sorted(firsts)],
            "compactions": compactions,
            "seconds": seconds,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=8_000)
    args = parser.parse_args()
    on = asyncio.run(session(args.turns, args.window))
    off = asyncio.run(session(args.turns, None))
    marks = sorted({1, *range(args.turns // 4, args.turns + 1, args.turns // 4)})
    print(f"{args.turns} turns, data grows to {args.turns * 1000:,} items; window {args.window:,}")
    print("| turn | prompt tokens, compaction | prompt tokens, baseline | ratio |")
    print("| --- | --- | --- | --- |")
    for mark in marks:
        a, b = on["prompt"][mark - 1], off["prompt"][mark - 1]
        print(f"| {mark} | {a:,} | {b:,} | {a / b:.2f} |")
    half = args.turns // 2
    mean_on = sum(on["prompt"][half:]) / (args.turns - half)
    mean_off = sum(off["prompt"][half:]) / (args.turns - half)
    print(
        f"| mean {half + 1}-{args.turns} | {mean_on:,.0f} | {mean_off:,.0f} | "
        f"{mean_on / mean_off:.2f} |"
    )
    print(
        f"| max | {max(on['prompt']):,} | {max(off['prompt']):,} | "
        f"{max(on['prompt']) / max(off['prompt']):.2f} |"
    )
    print(
        f"compactions: {on['compactions']}; wall time {on['seconds']:.1f} s with compaction, "
        f"{off['seconds']:.1f} s without"
    )


if __name__ == "__main__":
    main()
