"""What the harness costs a user: `rlm.harness` calls from a real kernel, and the system prompt of
each model call, on a store of `--entries` entries per kind.

In the kernel (a real kernel, the real bridge, `HeadlessRun`), medians of `--repeat` calls:
- bridge: a bridge call that touches no store (`harness.paths`), the floor every call pays;
- get: `rlm.harness.get("memory", id)`;
- list: `rlm.harness.list("memory")` (every memory crosses the bridge);
- update: `rlm.harness.update_memory(id, content=...)` (lock, re-read, fsync, rename);
- create: `rlm.harness.create_memory(...)`.

On the host, per model call (median of `--repeat` x 100 calls):
- base: the system prompt without the harness (the cached base prompt);
- unchanged: the prompt with the harness section when no store changed (two `stat`s);
- changed: the prompt right after a write (the section is rebuilt).

Run: `python bench/bench_harness.py [--entries 200] [--repeat 15]`.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from scripted_run import scripted_run  # noqa: E402

from prime_agent_lab.core.harness.store import KINDS, HarnessStore, build_entry  # noqa: E402
from prime_agent_lab.core.ports import OutputEvent  # noqa: E402
from prime_agent_lab.core.settings import Settings  # noqa: E402
from prime_agent_lab.headless import HeadlessRun  # noqa: E402

CELL = """
import json as _json, time as _time
import prime_agent_kernel as _pak

def _median_ms(work, repeat):
    times = []
    for i in range(repeat):
        start = _time.perf_counter()
        work(i)
        times.append((_time.perf_counter() - start) * 1000)
    return sorted(times)[len(times) // 2]

_h = rlm.harness
print(_json.dumps({
    "bridge": _median_ms(lambda i: _pak.client().call("harness.skill_paths", {}), REPEAT),
    "get": _median_ms(lambda i: _h.get("memory", "memory_7"), REPEAT),
    "list": _median_ms(lambda i: _h.list("memory"), REPEAT),
    "update": _median_ms(lambda i: _h.update_memory("memory_7", content=f"v{i}"), REPEAT),
    "create": _median_ms(lambda i: _h.create_memory(f"bench {i}", "new"), REPEAT),
}))
"""


def fill(store: HarnessStore, entries: int) -> None:
    skill = {"type": "python", "import": "statistics", "callable": "mean"}
    with store.transaction() as state:
        for kind in KINDS:
            for i in range(entries):
                fields: dict[str, Any] = {"id": f"{kind}_{i}", "title": f"{kind} {i}"}
                fields["content"] = f"note {i}: " + "a fact worth keeping " * 8
                if kind == "skill":
                    fields |= {"reference": skill, "arguments": {"data": "numbers"}}
                state.put(build_entry(kind, fields, "local", "agent"))


def prompt_costs(run: HeadlessRun, repeat: int) -> dict[str, float]:
    runtime, session_id = run.runtime, run.agent.session_id
    store = runtime.harnesses.harness_for(session_id).store()

    def per_call_us(work: Any) -> float:
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(100):
                work()
            samples.append((time.perf_counter() - start) * 1e6 / 100)
        return statistics.median(samples)

    runtime.system_prompt(session_id)
    base = per_call_us(lambda: runtime._prompts[session_id][1])
    unchanged = per_call_us(lambda: runtime.system_prompt(session_id))
    changes = []
    for i in range(repeat):
        store.update("memory", "memory_3", {"content": f"changed {i}"})
        start = time.perf_counter()
        runtime.system_prompt(session_id)
        changes.append((time.perf_counter() - start) * 1e6)
    return {"base": base, "unchanged": unchanged, "changed": statistics.median(changes)}


async def measure(entries: int, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        run = scripted_run(
            root,
            {"turns": [{"code": "x = 1"}, {"text": "ok"}]},
            Settings(cell_timeout=600),
            kernel_pool_size=0,
            harness_dir=str(root / "global"),
        )
        await run.start(lambda event: None)
        printed: list[str] = []

        def collect(event: OutputEvent) -> None:
            if event.output and event.output.get("output_type") == "stream":
                printed.append(str(event.output.get("text", "")))

        try:
            await run.settle(await run.agent.run_turn("start"))
            fill(run.runtime.harnesses.harness_for(run.agent.session_id).store(), entries)
            result = await run.agent.kernel.execute(
                CELL.replace("REPEAT", str(repeat)), collect, 600
            )
            prompt = await asyncio.to_thread(prompt_costs, run, repeat)
        finally:
            await run.close()
        if result.status != "ok":
            raise SystemExit(f"the benchmark cell failed: {result.status} {result.outputs}")
        return {"kernel": json.loads("".join(printed).strip().splitlines()[-1]), "host": prompt}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200, help="entries per kind")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.entries, args.repeat))
    kernel, host = figures["kernel"], figures["host"]
    print(f"store: {args.entries} entries per kind ({4 * args.entries} in all)")
    print("| call from the kernel | ms (median) | ratio to a bare bridge call |")
    print("| --- | --- | --- |")
    for key in ("bridge", "get", "list", "update", "create"):
        print(f"| {key} | {kernel[key]:.2f} | {kernel[key] / kernel['bridge']:.2f} |")
    print("| system prompt per model call | µs (median) | ratio to the base prompt |")
    print("| --- | --- | --- |")
    for key in ("base", "unchanged", "changed"):
        ratio = host[key] / host["base"] if host["base"] else 0.0
        print(f"| {key} | {host[key]:.1f} | {ratio:.1f} |")


if __name__ == "__main__":
    main()
