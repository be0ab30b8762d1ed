"""The kernel executor against a real local kernel (no server): setup, outputs, displays."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.channels import HBChannel
from jupyter_client.manager import AsyncKernelManager

from prime_agent_lab.adapters import kernel_executor
from prime_agent_lab.adapters.kernel_executor import KernelExecutor, KernelGone
from prime_agent_lab.core.ports import CellState, OutputEvent

from .kernel_clients import UserClient, wait_for_file


async def test_a_kernel_without_the_package_still_runs_cells_and_says_why_history_is_missing(
    kernel: AsyncKernelManager,
) -> None:
    executor = KernelExecutor(kernel, "k", lambda: "import prime_agent_kernel_missing_xyz")
    first = await executor.execute("print(6 * 7)", lambda e: None, 30)
    second = await executor.execute("print(7 * 7)", lambda e: None, 30)
    await executor.close()

    assert first.status == "ok" and first.outputs[0]["text"] == "42\n"
    assert "could not be loaded" in first.note and "ModuleNotFoundError" in first.note
    assert second.note == ""  # said once, not on every cell


async def test_display_updates_and_clear_output_reach_the_cell_as_events(
    kernel: AsyncKernelManager,
) -> None:
    executor = KernelExecutor(kernel, "k")
    events: list[OutputEvent] = []
    code = (
        "from IPython.display import display, clear_output\n"
        "h = display('first', display_id=True)\n"
        "h.update('second')\n"
        "print('gone')\n"
        "clear_output(wait=True)\n"
        "print('kept')"
    )
    result = await executor.execute(code, events.append, 30)
    await executor.close()

    kinds = [e.kind for e in events]
    assert kinds == ["output", "update_display", "output", "clear", "output"]
    assert events[1].output is not None and events[1].output["data"]["text/plain"] == "'second'"
    assert [o.get("text") for o in result.outputs] == ["kept\n"]


async def test_a_cell_that_ran_between_two_reads_is_still_reported_running(
    kernel: AsyncKernelManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a loaded machine the executor may read the cell's whole life (busy, output, idle, the
    reply) in one go: it ran all the same, and the chat's line must hear `running`."""
    executor = KernelExecutor(kernel, "k")
    await executor.prepare()
    pump = executor._pump

    async def late_pump(client: object, run: object, wait: float) -> bool:
        await asyncio.sleep(1.0)  # the short cell is over and all its messages wait for us
        return await pump(client, run, wait)

    monkeypatch.setattr(executor, "_pump", late_pump)
    states: list[CellState] = []
    result = await executor.execute("print('agent')", lambda e: None, 30, states.append)
    await executor.close()
    assert (result.status, states) == ("ok", ["running"])


async def test_executions_are_serialized_on_one_client(kernel: AsyncKernelManager) -> None:
    executor = KernelExecutor(kernel, "k")
    results = await asyncio.gather(
        *(
            executor.execute(f"import time; time.sleep(0.05); print({i})", lambda e: None, 30)
            for i in range(4)
        )
    )
    await executor.close()
    assert [r.outputs[0]["text"] for r in results] == ["0\n", "1\n", "2\n", "3\n"]
    assert [r.execution_count for r in results] == [1, 2, 3, 4]


async def test_the_agents_kernel_clients_start_no_heartbeat_thread(
    kernel: AsyncKernelManager,
) -> None:
    """jupyter_client's heartbeat is a thread per client; the product does not use it (the
    manager tells deaths), and a CLI run whose output was closed printed its traceback."""

    def heartbeats() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if isinstance(t, HBChannel) and t.is_alive()]

    before = heartbeats()
    executor = KernelExecutor(kernel, "k")
    result = await executor.execute("print('hi')", lambda e: None, 30)
    assert result.outputs[0]["text"] == "hi\n"
    assert heartbeats() == before  # its client stays connected: a heartbeat would be running
    await executor.close()


async def test_timeout_counts_from_when_the_agent_cell_starts_not_while_queued(
    kernel: AsyncKernelManager, tmp_path: Path
) -> None:
    executor = KernelExecutor(kernel, "k")
    await executor.prepare()
    flag = tmp_path / "user.go"
    loop = asyncio.get_running_loop()

    def on_state(state: CellState) -> None:
        if state == "waiting":  # the user's cell goes on for longer than the agent's timeout
            loop.call_later(2.0, flag.touch)

    async with UserClient(kernel) as user:
        user_cell = await user.start(wait_for_file(flag) + "print('u')")
        result = await executor.execute("print('agent')", lambda e: None, 1.0, on_state)
        assert (await user_cell)["status"] == "ok"  # the user's cell was not interrupted
    await executor.close()
    assert result.status == "ok" and result.outputs[0]["text"] == "agent\n"


async def test_the_agent_cell_waits_for_a_failing_user_cell_and_then_runs_instead_of_being_skipped(
    kernel: AsyncKernelManager, tmp_path: Path
) -> None:
    executor = KernelExecutor(kernel, "k")
    await executor.prepare()
    states: list[str] = []
    flag = tmp_path / "user.fail"

    def on_state(state: CellState) -> None:
        states.append(state)
        if state == "waiting":  # the user's cell fails only once the agent's cell waits for it
            flag.touch()

    async with UserClient(kernel) as user:
        user_cell = await user.start(wait_for_file(flag) + "raise ValueError")
        result = await executor.execute("print('agent')", lambda e: None, 30, on_state)
        assert (await user_cell)["status"] == "error"
    await executor.close()
    # Held until the kernel was idle, so the kernel's abort-after-error never reached it.
    assert states == ["waiting", "running"]
    assert result.status == "ok" and result.outputs[0]["text"] == "agent\n"


async def test_an_agent_cell_right_after_another_clients_cell_waits_out_the_quiet_period_only(
    kernel: AsyncKernelManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A quiet period long enough that the agent's cell surely arrives inside it, and a poll
    # interval of an hour: the cell must go in when the quiet period ends, not a poll later (a
    # sub-agent's first cell came 100 ms late after its kernel's hand-out this way). Waiting for
    # the poll would outlast the test's timeout.
    monkeypatch.setattr(kernel_executor, "QUIET_AFTER_USER_CELL", 0.5)
    monkeypatch.setattr(kernel_executor, "POLL", 3600.0)
    executor = KernelExecutor(kernel, "k")
    await executor.prepare()
    async with UserClient(kernel) as user:
        assert (await user.run("pass"))["status"] == "ok"
        asked = time.monotonic()
        result = await executor.execute("print('agent')", lambda e: None, 30)
        took = time.monotonic() - asked
    await executor.close()

    assert result.status == "ok" and result.outputs[0]["text"] == "agent\n"
    assert took >= 0.4  # a queued run-all still gets its quiet period


async def test_stop_while_queued_never_interrupts_the_users_cell_and_leaves_no_stale_output(
    kernel: AsyncKernelManager, tmp_path: Path
) -> None:
    executor = KernelExecutor(kernel, "k")
    await executor.prepare()
    flag = tmp_path / "user.go"
    waiting = asyncio.Event()

    def on_state(state: CellState) -> None:
        if state == "waiting":
            waiting.set()

    async with UserClient(kernel) as user:
        user_cell = await user.start(wait_for_file(flag))
        agent_cell = asyncio.ensure_future(
            executor.execute(
                "import time\nprint('late')\ntime.sleep(30)", lambda e: None, 60, on_state
            )
        )
        await asyncio.wait_for(waiting.wait(), 60)
        agent_cell.cancel()
        agent_cell.cancel()  # a second Stop must not orphan the clean-up
        with pytest.raises(asyncio.CancelledError):
            await agent_cell
        flag.touch()
        assert (await user_cell)["status"] == "ok"
    following = [await executor.execute(f"print('next {i}')", lambda e: None, 30) for i in range(3)]
    await executor.close()
    assert [r.outputs[0]["text"] for r in following] == ["next 0\n", "next 1\n", "next 2\n"]


async def test_the_model_is_told_when_the_kernel_restarted_between_agent_cells(
    kernel: AsyncKernelManager,
) -> None:
    executor = KernelExecutor(kernel, "k")
    await executor.execute("x = 1", lambda e: None, 30)
    await kernel.restart_kernel(now=True)
    result = await executor.execute("print('after')", lambda e: None, 30)
    await executor.close()
    assert result.status == "ok"
    assert "[kernel restarted]" in result.note and "gone" in result.note


async def test_a_kernel_shut_down_mid_cell_is_not_started_again(
    kernel: AsyncKernelManager,
) -> None:
    managed = [True]
    executor = KernelExecutor(kernel, "k", is_managed=lambda: managed[0])
    running = asyncio.Event()

    def on_state(state: CellState) -> None:
        if state == "running":
            running.set()

    cell = asyncio.ensure_future(
        executor.execute("import time\ntime.sleep(30)", lambda e: None, 60, on_state)
    )
    await asyncio.wait_for(running.wait(), 60)
    managed[0] = False
    await kernel.shutdown_kernel(now=True)
    with pytest.raises(KernelGone):
        await cell
    await executor.close()
    assert not await kernel.is_alive()


# After a restart the client's iopub subscription reconnects to the new process, and what was
# published before it is back is lost (ZeroMQ's slow joiner): a cell whose busy and idle never
# arrived waited as long as the kernel lived, its reply unread on the shell channel; one whose
# subscription came back while it ran got its `idle` but not what it printed before.
def _statuses(msg: dict[str, Any]) -> bool:
    return msg["header"]["msg_type"] in ("status", "execute_input")


def _everything(msg: dict[str, Any]) -> bool:
    return msg["header"]["msg_type"] in ("status", "execute_input", "stream")


def _all_before_idle(msg: dict[str, Any]) -> bool:
    return _everything(msg) and msg["content"].get("execution_state") != "idle"


@pytest.mark.parametrize(
    ("lost", "printed"),
    [(_statuses, ["42\n"]), (_everything, []), (_all_before_idle, [])],
    ids=["statuses", "everything", "all-before-idle"],
)
async def test_a_cell_whose_iopub_missed_its_messages_ends_with_its_reply_and_says_so(
    kernel: AsyncKernelManager,
    monkeypatch: pytest.MonkeyPatch,
    lost: Callable[[dict[str, Any]], bool],
    printed: list[str],
) -> None:
    executor = KernelExecutor(kernel, "k")
    assert (await executor.execute("x = 1", lambda event: None, 30)).status == "ok"
    losing = {"on": True}
    on_iopub = kernel_executor._Run.on_iopub

    def losing_the_cells_messages(run: Any, msg: dict[str, Any]) -> None:
        ours = msg["parent_header"].get("msg_id") == run.msg_id
        if not (losing["on"] and ours and lost(msg)):
            on_iopub(run, msg)

    monkeypatch.setattr(kernel_executor._Run, "on_iopub", losing_the_cells_messages)
    result = await asyncio.wait_for(
        executor.execute("print(x + 41)", lambda event: None, 30), timeout=60
    )
    losing["on"] = False
    after = await executor.execute("print(x)", lambda event: None, 30)
    await executor.close()
    assert result.status == "ok", result
    assert [o.get("text") for o in result.outputs] == printed
    assert result.note == kernel_executor.OUTPUT_LOST_NOTE  # what it printed may be cut short
    assert [o.get("text") for o in after.outputs] == ["1\n"] and after.note == ""


class _QueuedClient:
    """Hands out prepared iopub and shell messages in the order a kernel may deliver them."""

    def __init__(self, iopub: list[dict[str, Any]], shell: list[dict[str, Any]]) -> None:
        self.iopub, self.shell = iopub, shell

    async def get_iopub_msg(self, timeout: float) -> dict[str, Any]:
        if not self.iopub:
            raise queue.Empty
        return self.iopub.pop(0)

    async def get_shell_msg(self, timeout: float) -> dict[str, Any]:
        if not self.shell:
            raise queue.Empty
        return self.shell.pop(0)


async def test_an_aborted_reply_read_before_its_idle_does_not_count_as_run() -> None:
    # A reply may be read before its iopub `idle` (the loop reads the shell channel early so a
    # lost status cannot hang a cell); an `aborted` one must still leave the cell unrun, or the
    # executor gives up instead of sending it again after another client's failed cell.
    def reply(status: str) -> dict[str, Any]:
        return {
            "parent_header": {"msg_id": "m1"},
            "header": {"msg_type": "execute_reply"},
            "content": {"status": status, "execution_count": None},
        }

    executor = KernelExecutor(object(), "k")
    for status, ran in (("aborted", False), ("ok", True)):
        run = kernel_executor._Run("m1", lambda event: None)
        await executor._pump(_QueuedClient([], [reply(status)]), run, 0)
        assert run.reply is not None and run.executed is ran, status
