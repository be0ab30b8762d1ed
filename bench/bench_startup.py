"""Process start to the first model request: the headless CLI against the floor the SDK sets.

For each provider, alternating in one run (median of `--runs`), each a fresh process started from
this one, against the local model server of `bench_loop.py`:

- python: `python -c pass` (interpreter start-up, whole process);
- import: `python -c "import <sdk>"` (whole process);
- sdk floor: a process that imports the SDK, builds its async client (as the provider does:
  `max_retries=0`, base URL and key from the environment) and sends one request through it;
  measured from process start to the request's arrival at the server. No product can send its
  first request through the real SDK sooner;
- cli: `prime-agent-lab run "run 1 cells" --provider <p>`, process start to the first request.

"ours" = cli - sdk floor: what the product adds before its first request (argument parsing,
session and notebook set-up, launching the kernel, building the request).

Run: `python bench/bench_startup.py [--runs 5] [--providers openai,anthropic]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_loop import (
    MODEL,
    LoopModel,
    child_env,
    csv_choice,
    executable,
    prompt,
    run_process,
)

SDK_FLOOR = {
    "openai": """
import httpx2, openai
client = openai.AsyncOpenAI(max_retries=0)
body = {"model": "%s", "max_tokens": 64, "messages": [{"role": "user", "content": "run 1 cells"}]}
async def main():
    answer = await client.post("/chat/completions", cast_to=httpx2.Response, body=body)
    answer.json()
import asyncio; asyncio.run(main())
""",
    "anthropic": """
import anthropic, httpx2
client = anthropic.AsyncAnthropic(max_retries=0)
body = {"model": "%s", "max_tokens": 64, "messages": [{"role": "user", "content": "run 1 cells"}]}
async def main():
    answer = await client.post("/v1/messages", cast_to=httpx2.Response, body=body)
    answer.json()
import asyncio; asyncio.run(main())
""",
}


class Startup:
    def __init__(self, model: LoopModel) -> None:
        self.model = model
        self.env = child_env(model)
        self.cli = executable("prime-agent-lab")

    async def wall(self, argv: list[str], workdir: Path) -> float:
        return await run_process(argv, workdir, self.env, workdir / "process.log")

    async def first_request(self, argv: list[str], workdir: Path) -> float:
        """Seconds from starting `argv` to the arrival of its first model request."""
        mark = self.model.mark()
        start = time.perf_counter()
        await run_process(argv, workdir, self.env, workdir / "process.log")
        requests = self.model.since(mark)
        if not requests:
            raise RuntimeError(f"{argv[:3]} sent no model request")
        return requests[0].arrived - start

    async def sample(self, provider: str, workdir: Path) -> dict[str, float]:
        python = sys.executable
        cli = [self.cli, "run", prompt(1), "--provider", provider, "--model", MODEL]
        cli += ["--notebook", "startup.ipynb", "--mode", "json"]
        return {
            "python": await self.wall([python, "-c", "pass"], workdir),
            "import": await self.wall([python, "-c", f"import {provider}"], workdir),
            "sdk floor": await self.first_request(
                [python, "-c", SDK_FLOOR[provider] % MODEL], workdir
            ),
            "cli": await self.first_request(cli, workdir),
        }


async def main(options: argparse.Namespace) -> dict[str, dict[str, float]]:
    model = LoopModel()
    model.server.start()
    medians: dict[str, dict[str, float]] = {}
    try:
        startup = Startup(model)
        samples: dict[str, list[dict[str, float]]] = {p: [] for p in options.providers}
        for _ in range(options.runs):
            for provider in options.providers:  # alternating, so noise hits every figure
                with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
                    samples[provider].append(await startup.sample(provider, Path(tmp)))
        for provider, runs in samples.items():
            medians[provider] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    finally:
        model.server.stop()
    return medians


def report(medians: dict[str, dict[str, float]], runs: int) -> None:
    print(f"process start to the first model request (s), medians of {runs}")
    print("provider   python  import sdk  sdk floor    cli   ours (cli - sdk floor)")
    for provider, m in medians.items():
        print(
            f"{provider:<10} {m['python']:>6.3f} {m['import']:>11.3f} {m['sdk floor']:>10.3f} "
            f"{m['cli']:>6.3f} {m['cli'] - m['sdk floor']:>8.3f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--providers", type=csv_choice(("openai", "anthropic")), default=["openai", "anthropic"]
    )
    options = parser.parse_args()
    report(asyncio.run(main(options)), options.runs)
