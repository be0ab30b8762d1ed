"""`history` in the kernel on a long session: `len(history)` and `history.search(...)`.

A session of `--entries` entries (turns of a user message, an assistant message with one call, the
cell's start, its result and the turn's end; observations of about 200 characters) is written
with the product's `SessionLog`, continued with `HeadlessRun` (a real kernel and the real bridge),
and one cell in the kernel times, as medians of `--repeat` runs:

- first: the first `len(history)` (the whole record crosses the bridge once);
- len: `len(history)` again (only what was appended since travels: nothing here);
- search: `history.search("needle-7")` (the same, plus a regular expression over every entry);
- full: the baseline, measured in the same cell: fetching the whole record, which is what every
  access cost before `history` fetched incrementally.

Run: `python bench/bench_history.py [--entries 5000] [--repeat 9]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from prime_agent_lab.core.ports import OutputEvent  # noqa: E402
from prime_agent_lab.core.sessions import SessionRepository  # noqa: E402
from prime_agent_lab.core.settings import Settings  # noqa: E402
from prime_agent_lab.headless import HeadlessRun  # noqa: E402

CELL = """
import json as _json, time as _time
import prime_agent_kernel as _pak

def _median_ms(work, repeat):
    times = []
    for _ in range(repeat):
        start = _time.perf_counter()
        work()
        times.append((_time.perf_counter() - start) * 1000)
    return sorted(times)[len(times) // 2]

_start = _time.perf_counter()
_count = len(history)
_first = (_time.perf_counter() - _start) * 1000
print(_json.dumps({
    "entries_in_history": _count,
    "first": _first,
    "len": _median_ms(lambda: len(history), REPEAT),
    "search": _median_ms(lambda: history.search("needle-7"), REPEAT),
    "full": _median_ms(lambda: _pak.client().call("history.read"), REPEAT),
}))
"""


def write_session(root: Path, entries: int, notebook: str = "analysis.ipynb") -> str:
    log = SessionRepository(root / ".prime-agent" / "sessions").create(
        notebook_path=notebook, provider="scripted", model="demo"
    )
    for turn in range(1, entries // 5 + 1):
        log.append("user_message", text=f"question {turn}", turn=turn)
        code = json.dumps({"code": f"value_{turn} = compute({turn})"})
        call = {"id": f"call_{turn}", "name": "python", "arguments": code}
        log.append("assistant_message", text="", tool_calls=[call], turn=turn)
        log.append("cell_started", tool_call_id=f"call_{turn}", cell_id=f"c{turn}", turn=turn)
        observation = f"[stdout]\nneedle-{turn} " + "result text " * 16
        log.append("tool_result", tool_call_id=f"call_{turn}", observation=observation, turn=turn)
        log.append("turn_end", turn=turn, stop_reason="end_turn", final_text=f"answer {turn}")
    return log.session_id


async def measure(entries: int, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        session_id = write_session(root, entries)
        run = HeadlessRun(
            cwd=root,
            notebook="analysis.ipynb",
            provider="scripted",
            model=None,
            script_path=None,
            stream=False,
            kernel_name="python3",
            settings=Settings(cell_timeout=600),
            session_id=session_id,
            kernel_pool_size=0,
        )
        await run.start(lambda event: None)
        printed: list[str] = []

        def collect(event: OutputEvent) -> None:
            if event.output and event.output.get("output_type") == "stream":
                printed.append(str(event.output.get("text", "")))

        try:
            code = CELL.replace("REPEAT", str(repeat))
            result = await run.agent.kernel.execute(code, collect, 600)
        finally:
            await run.close()
        if result.status != "ok":
            raise SystemExit(f"the benchmark cell failed: {result.status} {result.outputs}")
        return dict(json.loads("".join(printed).strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.entries, args.repeat))
    print(f"session: {args.entries} entries ({figures['entries_in_history']} in history)")
    print("| access | ms (median) | ratio to the full fetch |")
    print("| --- | --- | --- |")
    for key in ("first", "len", "search", "full"):
        ratio = figures[key] / figures["full"] if figures["full"] else 0.0
        print(f"| {key} | {figures[key]:.2f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
