"""Stop and kernel restarts never cost the user their cell or their variables without saying so.

The agent shares the notebook's kernel with the user: its cell waits until the kernel is idle,
Stop withdraws it while it waits, only the agent's own running cell is ever interrupted, and a
restart happens only when that cell ignores the interrupt, visible in the chat, the notebook and
to the model.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager

from prime_agent_lab.adapters.file_notebook import FileNotebook
from prime_agent_lab.adapters.kernel_executor import KernelExecutor
from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.sessions import SessionRepository
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.core.transcript import chat_transcript
from prime_agent_lab.providers import make_provider

from .conftest import next_event, run_turn, use_script, wait_for
from .kernel_clients import UserClient, wait_for_file
from .test_server_e2e import live_agent_cells, run_user_cell

BENCH = Path(__file__).resolve().parents[1] / "bench" / "stress_stop.py"


def _load_stress() -> Any:
    spec = importlib.util.spec_from_file_location("stress_stop", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["stress_stop"] = module
    spec.loader.exec_module(module)
    return module


async def test_stop_while_the_agent_cell_waits_past_the_cell_timeout_leaves_the_users_cell_alone(
    kernel: AsyncKernelManager, tmp_path: Path, agent_script: Any
) -> None:
    """Today's bug: the wait for the agent's queued cell reused `cell_timeout` and then
    interrupted whatever ran, i.e. the user's cell."""
    script = agent_script([{"code": "print('agent ran')"}, {"text": "done"}])
    executor = KernelExecutor(kernel, "k")
    session = SessionRepository(tmp_path / "s").create(
        notebook_path="nb.ipynb", provider="scripted", model="demo"
    )
    agent = Agent(
        session,
        make_provider("scripted", None, script_path=script),
        FileNotebook(tmp_path / "nb.ipynb", 100_000),
        executor,
        Settings(cell_timeout=1.0),
    )
    seen: list[dict[str, Any]] = []
    agent.events.add_listener(seen.append)
    flag = tmp_path / "user.go"
    try:
        async with UserClient(kernel) as user:
            user_cell = await user.start("marker = 7\n" + wait_for_file(flag))
            _, turn = agent.start_turn("go")
            await wait_for(lambda: any(e["type"] == "cell_waiting" for e in seen), timeout=60)
            await asyncio.sleep(1.5)  # past cell_timeout while the user's cell still runs
            await agent.stop()
            outcome = await turn
            flag.touch()
            reply = await user_cell
            check = await user.run("assert marker == 7")
    finally:
        await executor.close()

    assert reply["status"] == "ok"  # not a KeyboardInterrupt
    assert check["status"] == "ok"  # the user's variable survived
    assert outcome.stop_reason == "stopped" and executor.restarts == 0
    result = next(e for e in session.path() if e["type"] == "tool_result")
    assert result["status"] == "skipped" and "never sent to the kernel" in result["observation"]
    waiting = next(e for e in seen if e["type"] == "cell_waiting")
    assert waiting["text"] == "waiting for your cell to finish"
    assert not any(e["type"] == "cell_running" for e in seen)


async def test_stop_at_random_moments_keeps_the_users_cell_and_variables(tmp_path: Path) -> None:
    """A short run of `bench/stress_stop.py` (run it with --trials 50 for the full figure)."""
    stress = _load_stress()
    rng = random.Random(5)
    script = stress.slow_demo_script(tmp_path, 0.6)
    trials = []
    for number in range(8):
        sleep = round(rng.uniform(0.8, 2.5), 2)
        trials.append(stress.Trial(number, sleep, round(rng.uniform(0, sleep + 2.5), 2)))

    async def one(trial: Any) -> Any:
        directory = tmp_path / f"t{trial.number}"
        directory.mkdir()
        return await stress.run_trial(trial, directory, script)

    gate = asyncio.Semaphore(4)

    async def gated(trial: Any) -> Any:
        async with gate:
            return await one(trial)

    results = await asyncio.gather(*(gated(t) for t in trials))
    assert all(t.ok for t in results), "\n".join(t.line() for t in results)


async def test_an_agent_cell_that_ignores_the_interrupt_restarts_the_kernel_and_says_so(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any
) -> None:
    stubborn = (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "print('ignoring interrupts', flush=True)\n"
        "time.sleep(60)"
    )
    use_script(host, agent_script([{"code": stubborn}, {"text": "never reached"}]))
    path = make_notebook("stubborn.ipynb")
    agent = await host.attach(path)
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    await next_event(queue, "cell_running")

    async def printed() -> bool:
        cells = await live_agent_cells(jp_serverapp, path)
        return bool(cells) and "ignoring" in "".join(o.get("text", "") for o in cells[0]["outputs"])

    await wait_for(printed, timeout=30)
    await host.stop(agent.session_id)

    notice = next(
        i for i in chat_transcript(agent.session) if i["type"] == "notice" and "kind" in i
    )
    assert notice["kind"] == "kernel_restarted" and "restarted" in notice["text"]
    result = next(e for e in agent.session.path() if e["type"] == "tool_result")
    assert result["status"] == "interrupted" and "kernel was restarted" in result["observation"]
    cell = (await live_agent_cells(jp_serverapp, path))[0]
    shown = "".join(o.get("text", "") for o in cell["outputs"])
    assert "[Prime Agent]" in shown and "kernel was restarted" in shown
    event = await next_event(queue, "notice")
    assert event["kind"] == "kernel_restarted"


async def test_a_kernel_restarted_from_the_kernel_menu_is_a_notice_the_model_hears_about(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    use_script(
        host,
        agent_script([{"code": "x = 1"}, {"text": "set"}, {"text": "heard"}]),
    )
    agent = await host.attach(make_notebook("menu.ipynb"))
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "set x")
    await next_event(queue, "turn_ended")
    kernel_id = agent.kernel.kernel_id

    await jp_fetch("api", "kernels", kernel_id, "restart", method="POST", body="{}")

    notice = await next_event(queue, "notice")
    assert notice["kind"] == "kernel_restarted_externally"
    items = chat_transcript(agent.session)
    # The snapshot taken as the turn began exists: the chat says it was not restored over a
    # restart the user chose, and how to bring it back.
    assert [(i["type"], i.get("kind")) for i in items[-2:]] == [
        ("notice", "kernel_restarted_externally"),
        ("notice", "kernel_state_not_restored"),
    ]
    next_prompt = [m.text for m in agent.session.context_messages() if m.role == "user"]
    await host.send(agent.session_id, "what now?")
    await next_event(queue, "turn_ended")
    told = [m.text for m in agent.session.context_messages() if m.role == "user"][-1]
    assert told.startswith("[notice] The kernel was restarted") and told.endswith("what now?")
    assert len(next_prompt) == 1


def test_stress_trial_line_says_what_happened() -> None:
    stress = _load_stress()
    trial = stress.Trial(3, 1.0, 0.5, "ok", "3", "stopped", 0, ("skipped",))
    assert trial.ok and trial.line().endswith(": ok")
    assert not stress.Trial(3, 1.0, 0.5, "error", "3", "stopped").ok
    assert json.dumps(trial.cell_statuses) == '["skipped"]'
    blocked = stress.Trial(4, 1.0, 2.0, "ok", "4", "stopped", 0, ("interrupted",), "await_block")
    assert not blocked.ok  # the agent's variable from before the turn is missing
    blocked.agent_var = "1"
    assert blocked.ok and "agent_var 1" in blocked.line()
    blocked.restarts = 1
    assert not blocked.ok  # a cell that awaits and blocks must not cost a restart
    stubborn = stress.Trial(5, 1.0, 2.0, "ok", "5", "stopped", 1, ("interrupted",), "stubborn")
    stubborn.agent_var = "1"
    assert stubborn.ok  # its restart is unavoidable; the snapshot brought everything back


async def test_stop_at_random_moments_on_cells_that_await_and_block_keeps_every_variable(
    tmp_path: Path,
) -> None:
    """A short run of `bench/stress_stop.py --kinds await_block,block,stubborn`."""
    stress = _load_stress()
    rng = random.Random(7)
    kinds = ["await_block"] * 4 + ["block", "stubborn"]
    trials = []
    for number, kind in enumerate(kinds):
        sleep = round(rng.uniform(0.5, 2.0), 2)
        stop_at = round(rng.uniform(sleep + 0.5, sleep + 3.0), 2)  # mostly while the cell runs
        trials.append(stress.Trial(number, sleep, stop_at, kind=kind))

    async def one(trial: Any) -> Any:
        directory = tmp_path / f"t{trial.number}"
        directory.mkdir()
        return await stress.run_product_trial(trial, directory, 30.0)

    gate = asyncio.Semaphore(3)

    async def gated(trial: Any) -> Any:
        async with gate:
            return await one(trial)

    results = await asyncio.gather(*(gated(t) for t in trials))
    assert all(t.ok for t in results), "\n".join(t.line() for t in results)
    assert all(t.restarts == 0 for t in results if t.kind != "stubborn")


class _SlowToWriteNotebook(FileNotebook):
    """A notebook whose cell insert waits for a gate (a slow live document), so Stop can land
    between the cell being written and being sent to the kernel."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writing = asyncio.Event()
        self.gate = asyncio.Event()

    async def append_code_cell(self, source: str, metadata: dict[str, Any]) -> Any:
        self.writing.set()
        await self.gate.wait()
        return await super().append_code_cell(source, metadata)


async def test_stop_while_the_agent_cell_is_being_written_never_sends_it_to_the_kernel(
    kernel: AsyncKernelManager, tmp_path: Path, agent_script: Any
) -> None:
    script = agent_script([{"code": "import time\ntime.sleep(600)"}, {"text": "done"}])
    executor = KernelExecutor(kernel, "k")
    session = SessionRepository(tmp_path / "s").create(
        notebook_path="nb.ipynb", provider="scripted", model="demo"
    )
    notebook = _SlowToWriteNotebook(tmp_path / "nb.ipynb", 100_000)
    agent = Agent(
        session,
        make_provider("scripted", None, script_path=script),
        notebook,
        executor,
        Settings(cell_timeout=600),
    )
    try:
        _, turn = agent.start_turn("go")
        await asyncio.wait_for(notebook.writing.wait(), timeout=10)
        stopping = asyncio.ensure_future(agent.stop())
        await asyncio.sleep(0.05)
        notebook.gate.set()
        async with asyncio.timeout(10):  # the cell sleeps 600 s if it is sent
            await stopping
            outcome = await turn
    finally:
        await executor.close()

    assert outcome.stop_reason == "stopped"
    result = next(e for e in session.path() if e["type"] == "tool_result")
    assert result["status"] == "skipped"
    assert executor.restarts == 0


# Agent cells that use top-level `await` (the product's idiom) and block: ipykernel 7 let them
# ignore every interrupt, so Stop restarted the kernel and wiped everyone's variables.
AWAIT_AND_BLOCK = {
    "await_before_the_block": (
        "import asyncio, time\nawait asyncio.sleep(0)\nprint('blocking', flush=True)\n"
        "time.sleep(60)"
    ),
    "await_after_the_block": (
        "import asyncio, time\nprint('blocking', flush=True)\ntime.sleep(60)\n"
        "await asyncio.sleep(0)"
    ),
    "await_of_a_coroutine_that_blocks": (
        "import time\nasync def slow():\n    print('blocking', flush=True)\n    time.sleep(60)\n"
        "await slow()"
    ),
    "block_then_await_rlm": (
        "import time\nprint('blocking', flush=True)\ntime.sleep(60)\nawait rlm.list_subagents()"
    ),
    "await_that_waits_long": (
        "import asyncio\nprint('blocking', flush=True)\nawait asyncio.sleep(600)"
    ),
}


async def _last_agent_cell_shows(jp_serverapp: Any, path: str, text: str) -> None:
    async def shown() -> bool:
        cells = await live_agent_cells(jp_serverapp, path)
        return bool(cells) and text in "".join(o.get("text", "") for o in cells[-1]["outputs"])

    await wait_for(shown, timeout=30)


@pytest.mark.parametrize("code", AWAIT_AND_BLOCK.values(), ids=list(AWAIT_AND_BLOCK))
async def test_stop_ends_an_agent_cell_that_awaits_and_blocks_without_restarting_the_kernel(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any, code: str
) -> None:
    use_script(
        host,
        agent_script([{"code": "agent_var = 1"}, {"code": code}, {"text": "never reached"}]),
    )
    path = make_notebook("await-block.ipynb")
    agent = await host.attach(path)
    await wait_for(lambda: agent.kernel.kernel_id, timeout=30)
    kernel_id = agent.kernel.kernel_id
    await run_user_cell(jp_serverapp, kernel_id, "user_var = 7")
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    await next_event(queue, "cell_running")  # the live document exists from here on
    await _last_agent_cell_shows(jp_serverapp, path, "blocking")
    await host.stop(agent.session_id)

    results = [e for e in agent.session.path() if e["type"] == "tool_result"]
    assert [r["status"] for r in results] == ["ok", "interrupted"]
    observation = results[1]["observation"]
    assert "KeyboardInterrupt" in observation or "CancelledError" in observation, observation
    assert "restarted" not in observation
    assert host.fleet.executor(kernel_id).restarts == 0
    assert not any(
        i["type"] == "notice" and i.get("kind") == "kernel_restarted"
        for i in chat_transcript(agent.session)
    )
    both = await run_user_cell(jp_serverapp, kernel_id, "print(user_var, agent_var)")
    assert both.strip() == "7 1"
    ended = await next_event(queue, "turn_ended")
    assert ended["stop_reason"] == "stopped"


async def test_a_stop_that_needs_a_restart_brings_back_what_the_kernel_held_when_the_turn_began(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any
) -> None:
    """A cell that truly ignores SIGINT still costs a restart; the snapshot taken as the turn
    started comes back, the user's cell run after the last turn's snapshot included."""
    stubborn = (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "turn_var = 3\n"
        "print('ignoring interrupts', flush=True)\n"
        "time.sleep(60)"
    )
    use_script(
        host,
        agent_script(
            [{"code": "agent_var = 1"}, {"text": "set"}, {"code": stubborn}, {"text": "never"}]
        ),
    )
    path = make_notebook("stubborn-restore.ipynb")
    agent = await host.attach(path)
    await run_turn(host, agent.session_id, "set a variable")
    await wait_for(lambda: not host.runtime.snapshots.pending_save(agent.session_id), timeout=30)
    kernel_id = agent.kernel.kernel_id
    await run_user_cell(jp_serverapp, kernel_id, "user_var = 7")  # after that snapshot
    queue = agent.events.subscribe()
    await host.send(agent.session_id, "block")
    await _last_agent_cell_shows(jp_serverapp, path, "ignoring")
    await host.stop(agent.session_id)

    assert host.fleet.executor(kernel_id).restarts == 1
    result = [e for e in agent.session.path() if e["type"] == "tool_result"][-1]
    observation = result["observation"]
    assert result["status"] == "interrupted" and "kernel was restarted" in observation
    assert "all variables and imports are gone" not in observation
    assert "Kernel variables restored from the snapshot of" in observation
    assert "agent_var" in observation and "user_var" in observation
    notices = [i for i in chat_transcript(agent.session) if i["type"] == "notice" and "kind" in i]
    assert [n["kind"] for n in notices][-2:] == ["kernel_restarted", "kernel_state_restored"]
    assert "user_var" in notices[-1]["text"] and "agent_var" in notices[-1]["text"]
    both = await run_user_cell(jp_serverapp, kernel_id, "print(user_var, agent_var)")
    assert both.strip() == "7 1"
    gone = await run_user_cell(jp_serverapp, kernel_id, "print('turn_var' in dir())")
    assert gone.strip() == "False"  # set after the snapshot: said to be gone, and it is
    ended = await next_event(queue, "turn_ended")
    assert ended["stop_reason"] == "stopped"
