"""Stress: Stop at random moments while the agent's cell waits behind, or runs after, a user cell.

Each trial runs on a real kernel through the real agent loop (scripted model, file notebook): a
user client runs `marker = N` then sleeps; the agent's turn starts while the user's cell runs, so
its first cell has to wait; Stop comes at a random moment. A trial passes when the user's cell
finished normally, every variable that existed before the turn is still there, and the turn
ended `stopped` or `end_turn`. Trials run on several kernels at once (they mostly sleep).

Kinds of trial (`--kinds`, assigned in turn):

- `demo`: the bundled demo walkthrough on a bare kernel; the kernel is never restarted.
- `await_block`, `block`: the product's own set-up (`HeadlessRun`: kernel package, bridge,
  snapshots). A first turn sets `agent_var`; the stopped turn's cell blocks for `--agent-block`
  seconds, with a top-level `await` before it, after it, around it (`await` of a coroutine that
  blocks, `await rlm.list_subagents()` after it) or none (`block`). `marker` and `agent_var` must
  survive and the kernel is never restarted.
- `stubborn`: the cell ignores SIGINT (`signal.SIG_IGN`), so Stop restarts the kernel; the snapshot
  taken as the turn began must bring `marker` and `agent_var` back.

    python bench/stress_stop.py --trials 50 --parallel 5 --min-sleep 6 --max-sleep 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager

from prime_agent_lab.adapters.file_notebook import FileNotebook
from prime_agent_lab.adapters.kernel_executor import KernelExecutor
from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.pending_kernel import PendingKernel
from prime_agent_lab.core.sessions import SessionRepository
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.headless import HeadlessRun
from prime_agent_lab.providers import make_provider

DEMO_SCRIPT = Path(__file__).resolve().parents[1] / "prime_agent_lab" / "demo" / "demo_script.json"
KINDS = ("demo", "await_block", "block", "stubborn")
AGENT_VALUE = "1"  # what the first turn's cell sets `agent_var` to

# The stopped turn's cell, per kind: `{block}` seconds of blocking code.
AWAIT_AND_BLOCK = (
    "import asyncio, time\nawait asyncio.sleep(0)\ntime.sleep({block})",
    "import asyncio, time\ntime.sleep({block})\nawait asyncio.sleep(0)",
    "import time\nasync def slow():\n    time.sleep({block})\nawait slow()",
    "import time\ntime.sleep({block})\nawait rlm.list_subagents()",
)
BLOCK = "import time\ntime.sleep({block})"
STUBBORN = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep({block})"


@dataclass
class Trial:
    number: int
    user_sleep: float
    stop_at: float
    user_status: str = ""
    marker: str = ""
    stop_reason: str = ""
    restarts: int = 0
    cell_statuses: tuple[str, ...] = ()
    kind: str = "demo"
    agent_var: str = ""
    cell: str = ""  # the stopped turn's cell (await_block: which variant)

    @property
    def ok(self) -> bool:
        kept = self.marker == str(self.number) and (
            self.kind == "demo" or self.agent_var == AGENT_VALUE
        )
        return (
            self.user_status == "ok"
            and kept
            and self.restarts <= (1 if self.kind == "stubborn" else 0)
            and self.stop_reason in ("stopped", "end_turn")
        )

    def line(self) -> str:
        verdict = "ok" if self.ok else "FAIL"
        agent = f", agent_var {self.agent_var or '-'}" if self.kind != "demo" else ""
        return (
            f"trial {self.number:3d} {self.kind:11s}: user sleep {self.user_sleep:5.1f} s, stop "
            f"at {self.stop_at:5.1f} s -> user {self.user_status}, marker {self.marker or '-'}"
            f"{agent}, turn {self.stop_reason}, cells {','.join(self.cell_statuses) or '-'}, "
            f"restarts {self.restarts}: {verdict}"
        )


async def _user_run(client: Any, code: str) -> tuple[str, str]:
    texts: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["header"]["msg_type"] == "stream":
            texts.append(msg["content"]["text"])
        elif msg["header"]["msg_type"] == "error":
            texts.append(msg["content"]["ename"])

    reply = await client.execute_interactive(code, output_hook=hook, timeout=300)
    return reply["content"]["status"], "".join(texts).strip()


def slow_demo_script(directory: Path, agent_sleep: float) -> str | None:
    """The demo script with `time.sleep(agent_sleep)` after each cell, so Stop can land while
    an agent cell runs (None: the demo as it is)."""
    if agent_sleep <= 0:
        return None
    demo = json.loads(DEMO_SCRIPT.read_text())
    for turn in demo["turns"]:
        if "code" in turn:
            turn["code"] += f"\nimport time as _t\n_t.sleep({agent_sleep})"
    path = directory / "slow-demo.json"
    path.write_text(json.dumps(demo))
    return str(path)


async def run_trial(trial: Trial, workdir: Path, script: str | None = None) -> Trial:
    km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel(cwd=str(workdir))
    executor = KernelExecutor(km, f"k{trial.number}")
    user = km.client_factory(parent=km)
    user.load_connection_info(km.get_connection_info())
    user.start_channels()
    try:
        await user.wait_for_ready(timeout=60)
        session = SessionRepository(workdir / "sessions").create(
            notebook_path=f"t{trial.number}.ipynb", provider="scripted", model="demo"
        )
        agent = Agent(
            session,
            make_provider("scripted", None, script_path=script),
            FileNotebook(workdir / f"t{trial.number}.ipynb", 1_000_000),
            executor,
            Settings(),
        )
        user_cell = asyncio.ensure_future(
            _user_run(user, f"marker = {trial.number}\nimport time\ntime.sleep({trial.user_sleep})")
        )
        await asyncio.sleep(0.3)  # the user's cell is running when the turn starts
        _, turn = agent.start_turn("Find the incident in the server log")
        await asyncio.sleep(trial.stop_at)
        await agent.stop()
        outcome = await turn
        trial.stop_reason = outcome.stop_reason
        trial.user_status, _ = await user_cell
        _, trial.marker = await _user_run(user, "print(marker)")
        trial.restarts = executor.restarts
        trial.cell_statuses = tuple(
            str(e["status"]) for e in session.path() if e["type"] == "tool_result"
        )
        return trial
    finally:
        user.stop_channels()
        await executor.close()
        await km.shutdown_kernel(now=True)


def stopped_cell(kind: str, variant: int, block: float) -> str:
    """The code of the stopped turn's cell for a trial of `kind`."""
    if kind == "await_block":
        template = AWAIT_AND_BLOCK[variant % len(AWAIT_AND_BLOCK)]
    else:
        template = {"block": BLOCK, "stubborn": STUBBORN}[kind]
    return template.format(block=block)


async def run_product_trial(trial: Trial, workdir: Path, agent_block: float) -> Trial:
    """A trial on the product's own set-up: a first turn sets `agent_var`, the user's cell sets
    `marker` and sleeps, the second turn's cell (of the trial's kind) is stopped."""
    trial.cell = stopped_cell(trial.kind, trial.number, agent_block)
    script = workdir / "script.json"
    turns = [
        {"code": f"agent_var = {AGENT_VALUE}"},
        {"text": "set"},
        {"code": trial.cell},
        {"text": "done"},
    ]
    script.write_text(json.dumps({"turns": turns}))
    run = HeadlessRun(
        cwd=workdir,
        notebook=f"t{trial.number}.ipynb",
        provider="scripted",
        model=None,
        script_path=str(script),
        stream=False,
        kernel_name="python3",
        settings=Settings(),
        kernel_pool_size=0,
        harness_dir=str(workdir / "harness"),
    )
    user: Any = None
    try:
        await run.start(lambda event: None)
        agent = run.agent
        await agent.run_turn("set a variable")
        kernel = agent.kernel
        executor = await kernel.ready() if isinstance(kernel, PendingKernel) else kernel
        assert isinstance(executor, KernelExecutor)
        km = executor.km
        user = km.client_factory(parent=km)
        user.load_connection_info(km.get_connection_info())
        user.start_channels()
        await user.wait_for_ready(timeout=60)
        user_cell = asyncio.ensure_future(
            _user_run(user, f"marker = {trial.number}\nimport time\ntime.sleep({trial.user_sleep})")
        )
        await asyncio.sleep(0.3)  # the user's cell is running when the turn starts
        _, turn = agent.start_turn("block")
        await asyncio.sleep(trial.stop_at)
        await agent.stop()
        outcome = await turn
        trial.stop_reason = outcome.stop_reason
        trial.user_status, _ = await user_cell
        _, trial.marker = await _user_run(user, "print(marker)")
        _, trial.agent_var = await _user_run(user, "print(agent_var)")
        trial.restarts = executor.restarts
        trial.cell_statuses = tuple(
            str(e["status"]) for e in agent.session.path() if e["type"] == "tool_result"
        )[1:]
        return trial
    finally:
        if user is not None:
            user.stop_channels()
        await run.close()


async def main(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds:
        print(f"unknown kinds {unknown}: choose from {', '.join(KINDS)}", file=sys.stderr)
        return 2
    trials = [
        Trial(
            n,
            round(s := rng.uniform(args.min_sleep, args.max_sleep), 2),
            round(rng.uniform(0, args.max_stop if args.max_stop is not None else s + 1), 2),
            kind=kinds[n % len(kinds)],
        )
        for n in range(args.trials)
    ]
    gate = asyncio.Semaphore(args.parallel)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        script = slow_demo_script(Path(tmp), args.agent_sleep)

        async def one(trial: Trial) -> Trial:
            async with gate:
                directory = Path(tmp) / f"trial{trial.number}"
                directory.mkdir()
                if trial.kind == "demo":
                    done = await run_trial(trial, directory, script)
                else:
                    done = await run_product_trial(trial, directory, args.agent_block)
                print(done.line(), flush=True)
                return done

        results = await asyncio.gather(*(one(t) for t in trials))
    passed = sum(t.ok for t in results)
    for kind in kinds:
        of_kind = [t for t in results if t.kind == kind]
        restarts = sum(t.restarts for t in of_kind)
        print(f"{kind}: {sum(t.ok for t in of_kind)}/{len(of_kind)} ok, {restarts} kernel restarts")
    print(
        f"{passed}/{len(results)} trials kept the user's cell and every variable from before the "
        f"turn ({time.monotonic() - started:.0f} s)"
    )
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--parallel", type=int, default=5)
    parser.add_argument("--min-sleep", type=float, default=6.0)
    parser.add_argument("--max-sleep", type=float, default=20.0)
    parser.add_argument("--max-stop", type=float, default=20.0, help="Stop at U(0, this) s")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--agent-sleep", type=float, default=0.0, help="seconds each demo cell sleeps at its end"
    )
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"trial kinds, in turn (of {', '.join(KINDS)})"
    )
    parser.add_argument(
        "--agent-block", type=float, default=30.0, help="seconds the stopped cell blocks"
    )
    sys.exit(asyncio.run(main(parser.parse_args())))
