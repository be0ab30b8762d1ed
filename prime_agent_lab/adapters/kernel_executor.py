"""The kernel port over a jupyter_client kernel manager (local, server-side or gateway).

One `AsyncKernelClient` per kernel, made with `client_factory` so it has its own session id and
never steals replies from the browser or other clients. Executions are serialized. Only messages
whose parent is our own request are read, so cells the user runs meanwhile are untouched.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import time
from collections.abc import Callable
from typing import Any

from nbformat.v4 import output_from_msg

from ..core.ports import ExecutionResult, KernelUnavailable, OutputEvent

log = logging.getLogger(__name__)

OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")
INTERRUPT_GRACE = 5.0  # seconds to wait for a reply after SIGINT before restarting the kernel
RESTART_WAIT = 15.0  # seconds to wait for an automatic restart after the kernel died
READY_TIMEOUT = 3600.0  # a new client's first reply can wait behind a long cell the user runs


def bridge_setup_code(bridge_url: str, kernel_id: str) -> str:
    """The silent cell that loads the kernel package and points its bridge at the host."""
    return (
        "import prime_agent_kernel as _prime_agent_kernel\n"
        f"_prime_agent_kernel.configure({bridge_url!r}, {kernel_id!r})\n"
        "del _prime_agent_kernel\n"
    )


class KernelGone(KernelUnavailable):
    """The kernel was shut down (not crashed): nothing here may start it again."""


class KernelExecutor:
    """Runs agent cells on one kernel.

    The lock serializes our executions. It is held until our request has finished in the kernel:
    when a run is cancelled (the user pressed Stop), a background task keeps the lock, waits until
    our cell actually starts (it may be queued behind a cell the user runs), interrupts only that
    cell, drains its messages, and then releases the lock. So a Stop never interrupts the user's
    own cell, and stale messages never reach the next agent cell.
    """

    def __init__(
        self,
        kernel_manager: Any,
        kernel_id: str,
        setup_code: Callable[[], str | None] | None = None,
        is_managed: Callable[[], bool] = lambda: True,
    ) -> None:
        self.km = kernel_manager
        self.kernel_id = kernel_id
        self._setup_code = setup_code
        self._is_managed = is_managed
        self._client: Any = None
        self._client_generation: object = None
        self._setup_generation: object = None
        self._last_run_generation: object = None
        self._lock = asyncio.Lock()
        self._reaper: asyncio.Task[None] | None = None
        self.restarts = 0
        self.setup_problem: str | None = None
        self._setup_problem_reported = True

    # ------------------------------------------------------------ lifecycle

    def _generation(self) -> object:
        """Changes whenever the kernel process is replaced (restart by anyone)."""
        provisioner = getattr(self.km, "provisioner", None)
        pid = getattr(provisioner, "pid", None)
        return pid if pid is not None else id(provisioner)

    async def _ensure_client(self) -> Any:
        generation = self._generation()
        if self._client is not None and self._client_generation == generation:
            return self._client
        self._close_client()
        client = self.km.client_factory(parent=self.km)
        client.load_connection_info(self.km.get_connection_info())
        client.start_channels()
        try:
            # kernel_info waits behind a cell the user is running; that is the wait we want.
            await client.wait_for_ready(timeout=READY_TIMEOUT)
        except BaseException:
            client.stop_channels()
            raise
        self._client, self._client_generation = client, generation
        return client

    def _close_client(self) -> None:
        if self._client is not None:
            try:
                self._client.stop_channels()
            except Exception:  # a client on a dead kernel may fail to close; it is dropped anyway
                log.debug("closing kernel client failed", exc_info=True)
        self._client = None

    async def _ensure_setup(self) -> None:
        """Load the kernel package once per kernel process.

        A kernel whose environment lacks the package still runs agent cells; the first cell's
        observation says what is missing, so the model and the user know `history` is absent.
        """
        if self._setup_code is None or self._setup_generation == self._generation():
            return
        code = self._setup_code()
        if not code:
            self._setup_generation = self._generation()
            return
        client = await self._ensure_client()
        msg_id = client.execute(code, silent=True, store_history=False, allow_stdin=False)
        content = (await self._wait_reply(client, msg_id, READY_TIMEOUT))["content"]
        if content.get("status") == "aborted":
            return  # skipped because a user cell failed just before; try again next cell
        self._setup_generation = self._generation()
        if content.get("status") != "ok":
            self.setup_problem = (
                "[note] The Prime Agent kernel package could not be loaded in this kernel "
                f"({content.get('ename')}: {content.get('evalue')}), so `history` is not "
                "available here. Install prime-agent-lab in the kernel's environment to get it."
            )
            self._setup_problem_reported = False
            log.warning("kernel %s: %s", self.kernel_id, self.setup_problem)

    async def _wait_reply(self, client: Any, msg_id: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no reply from the kernel")
            try:
                msg = await client.get_shell_msg(timeout=min(remaining, 1.0))
            except queue.Empty:
                if not await self.km.is_alive():
                    raise RuntimeError("the kernel died while loading the kernel package") from None
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg

    async def close(self) -> None:
        if self._reaper is not None and not self._reaper.done():
            self._reaper.cancel()
        self._close_client()

    async def interrupt(self) -> None:
        await self.km.interrupt_kernel()

    async def prepare(self) -> None:
        """Connect and load the kernel package ahead of the first cell (overlaps model time)."""
        async with self._lock:
            await self._ensure_client()
            await self._ensure_setup()

    # ------------------------------------------------------------ execution

    async def execute(
        self,
        code: str,
        on_event: Callable[[OutputEvent], None],
        timeout: float,
    ) -> ExecutionResult:
        await self._lock.acquire()
        hand_off: tuple[Any, _Run, float] | None = None
        reaping = False
        try:
            notes: list[str] = []
            if not await self.km.is_alive():
                await self._recover_dead_kernel()
            if self._last_run_generation not in (None, self._generation()):
                notes.append(
                    "[kernel restarted] The kernel was restarted since the last agent cell: "
                    "variables and imports from before are gone."
                )
            await self._ensure_client()
            await self._ensure_setup()
            if self.setup_problem and not self._setup_problem_reported:
                self._setup_problem_reported = True
                notes.append(self.setup_problem)
            client = self._client
            generation = self._client_generation
            msg_id = client.execute(
                code, store_history=True, allow_stdin=False, stop_on_error=False
            )
            run = _Run(msg_id, on_event)
            hand_off = (client, run, timeout)
            result = await self._run(client, run, generation, timeout)
            hand_off = None
            self._last_run_generation = self._generation()
            result.note = "\n".join(n for n in (*notes, result.note) if n)
            return result
        except asyncio.CancelledError:
            if hand_off is not None:  # our request is in the kernel: the reaper owns the lock now
                self._reaper = asyncio.ensure_future(self._reap(*hand_off))
                reaping = True
            raise
        finally:
            if not reaping:
                self._lock.release()

    async def _run(
        self, client: Any, run: _Run, generation: object, timeout: float
    ) -> ExecutionResult:
        deadline: float | None = None
        while not run.done:
            if deadline is None and run.started:
                deadline = time.monotonic() + timeout  # time queued behind user cells is free
            remaining = 0.5 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return await self._on_timeout(client, run, timeout)
            got = await self._pump(client, run, min(remaining, 0.5))
            if not got and await self._kernel_died(generation):
                return await self._on_death(run)
        return run.result()

    async def _reap(self, client: Any, run: _Run, timeout: float) -> None:
        """After a cancel: interrupt our own cell once it runs, drain it, then free the lock."""
        try:
            deadline = time.monotonic() + timeout
            while not run.done and not run.started and time.monotonic() < deadline:
                if not await self._pump(client, run, 0.2) and not await self.km.is_alive():
                    return
            if not run.done:
                await self.km.interrupt_kernel()
                if not await self._drain(client, run, INTERRUPT_GRACE):
                    log.warning("kernel %s ignored the interrupt; restarting it", self.kernel_id)
                    await self._restart()
        except Exception:
            log.warning(
                "stopping the agent cell on kernel %s failed", self.kernel_id, exc_info=True
            )
        finally:
            self._lock.release()

    async def _pump(self, client: Any, run: _Run, wait: float) -> bool:
        """Read what is available on iopub and shell; True if anything arrived."""
        got = False
        try:
            msg = await client.get_iopub_msg(timeout=wait if not run.idle else 0.05)
            run.on_iopub(msg)
            got = True
            # Drain whatever else is already queued without waiting.
            while True:
                msg = await client.get_iopub_msg(timeout=0)
                run.on_iopub(msg)
        except queue.Empty:
            pass
        if run.idle and run.reply is None:
            try:
                msg = await client.get_shell_msg(timeout=0.05 if got else wait)
                if msg["parent_header"].get("msg_id") == run.msg_id:
                    run.reply = msg
                got = True
            except queue.Empty:
                pass
        return got

    async def _kernel_died(self, generation: object) -> bool:
        return self._generation() != generation or not await self.km.is_alive()

    async def _on_timeout(self, client: Any, run: _Run, timeout: float) -> ExecutionResult:
        await self.km.interrupt_kernel()
        if await self._drain(client, run, INTERRUPT_GRACE):
            result = run.result()
            result.status = "timeout"
            result.note = (
                f"[timeout] The cell ran longer than {timeout:g} s and was interrupted "
                "(KeyboardInterrupt). The kernel and its variables are intact."
            )
            return result
        await self._restart()
        result = run.result()
        result.status = "timeout"
        result.note = (
            f"[timeout] The cell ran longer than {timeout:g} s and did not stop when interrupted, "
            "so the kernel was restarted: all variables are gone."
        )
        return result

    async def _on_death(self, run: _Run) -> ExecutionResult:
        await self._recover_dead_kernel()
        result = run.result()
        result.status = "died"
        result.note = (
            "[kernel died] The kernel process exited while this cell ran. It was restarted: all "
            "variables and imports are gone, so re-create what you need."
        )
        return result

    async def _recover_dead_kernel(self) -> None:
        """Wait for the server's auto-restart if it has one, otherwise restart ourselves.

        A kernel that was shut down on purpose (no longer managed) is never started again here.
        """
        self._close_client()
        if not self._is_managed():
            raise KernelGone(
                "the notebook's kernel was shut down; start a kernel for the notebook and send "
                "the message again"
            )
        restarter = getattr(self.km, "_restarter", None)
        if restarter is not None and getattr(self.km, "autorestart", False):
            deadline = time.monotonic() + RESTART_WAIT
            while time.monotonic() < deadline:
                if not self._is_managed():
                    raise KernelGone("the notebook's kernel was shut down while a cell ran")
                if self._generation() != self._client_generation and await self.km.is_alive():
                    self.restarts += 1
                    return
                await asyncio.sleep(0.1)
        if not await self.km.is_alive() or self._generation() == self._client_generation:
            await self._restart()
        else:
            self.restarts += 1

    async def _restart(self) -> None:
        self._close_client()
        if not self._is_managed():
            raise KernelGone("the notebook's kernel was shut down")
        await self.km.restart_kernel(now=True)
        self.restarts += 1

    async def _drain(self, client: Any, run: _Run, grace: float) -> bool:
        deadline = time.monotonic() + grace
        while not run.done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await self._pump(client, run, min(remaining, 0.2))
        return True


class _Run:
    """The state of one execute_request while its messages arrive."""

    def __init__(self, msg_id: str, on_event: Callable[[OutputEvent], None]) -> None:
        self.msg_id = msg_id
        self.on_event = on_event
        self.outputs: list[dict[str, Any]] = []
        self.display_index: dict[str, int] = {}
        self.execution_count: int | None = None
        self.idle = False
        self.started = False
        self.reply: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        return self.idle and self.reply is not None

    def on_iopub(self, msg: dict[str, Any]) -> None:
        if msg["parent_header"].get("msg_id") != self.msg_id:
            return
        msg_type = msg["header"]["msg_type"]
        content = msg["content"]
        if msg_type == "status":
            state = content.get("execution_state")
            if state == "busy":
                self.started = True
            elif state == "idle":
                self.idle = True
        elif msg_type == "execute_input":
            self.started = True
            self.execution_count = content.get("execution_count")
        elif msg_type in OUTPUT_TYPES:
            output = dict(output_from_msg(msg))
            display_id = (content.get("transient") or {}).get("display_id")
            if display_id:
                self.display_index[display_id] = len(self.outputs)
            self.outputs.append(output)
            self.on_event(OutputEvent("output", output=output, display_id=display_id))
        elif msg_type == "clear_output":
            self.outputs.clear()
            self.display_index.clear()
            self.on_event(OutputEvent("clear", wait=bool(content.get("wait"))))
        elif msg_type == "update_display_data":
            display_id = (content.get("transient") or {}).get("display_id")
            if display_id and display_id in self.display_index:
                output = {
                    "output_type": "display_data",
                    "data": content.get("data", {}),
                    "metadata": content.get("metadata", {}),
                }
                self.outputs[self.display_index[display_id]] = output
                self.on_event(OutputEvent("update_display", output=output, display_id=display_id))

    def result(self) -> ExecutionResult:
        status = "ok"
        if self.reply is not None:
            reply_status = self.reply["content"].get("status")
            if reply_status == "error":
                status = "error"
            elif reply_status == "aborted":
                status = "aborted"
            count = self.reply["content"].get("execution_count")
            if count is not None:
                self.execution_count = count
        elif any(o.get("output_type") == "error" for o in self.outputs):
            status = "error"
        note = ""
        if status == "aborted":
            note = (
                "[not run] The kernel skipped this cell because a cell queued before it (run by "
                "the user) raised an error. Nothing in it ran; run it again if it is still needed."
            )
        return ExecutionResult(
            status=status,
            execution_count=self.execution_count,
            outputs=list(self.outputs),
            note=note,
        )
