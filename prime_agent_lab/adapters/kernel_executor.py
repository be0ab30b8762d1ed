"""The kernel port over a jupyter_client kernel manager (local, server-side or gateway).

One `AsyncKernelClient` per kernel, made with `new_client` so it has its own session id and
never steals replies from the browser or other clients. Executions are serialized. Only messages
whose parent is our own request are read, so cells the user runs meanwhile are untouched.

Size: over 600 lines because waiting for other clients' cells, running ours, stopping it and
recovering the kernel share one client, one lock and one view of the kernel's activity; output
folding lives in `core/output_fold.py`, the setup of each kernel process (the kernel package, its
secret, its process token) in `kernel_preparation.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import queue
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..core.output_fold import OutputFold
from ..core.ports import (
    CellState,
    ExecutionResult,
    ExecutionStatus,
    KernelUnavailable,
    OutputEvent,
)
from ..core.stop_cause import USER_STOP, StopCause
from . import output_rate_limit
from .gateway_gone import gateway_gone
from .kernel_package_check import KernelPackageProblem
from .kernel_preparation import READY_TIMEOUT, UNPREPARED_PROCESS_NOTE, KernelPreparation
from .kernel_preparation import bridge_setup_code as bridge_setup_code  # where callers find it
from .kernel_process import TOKEN, TOKEN_EXPRESSION
from .kernel_secret import KernelSetup
from .kernel_source import new_client
from .nbjson import output_from_msg

log = logging.getLogger(__name__)

OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")
INTERRUPT_GRACE = 5.0  # seconds to wait for a reply after SIGINT before restarting the kernel
RESIGNAL_EVERY = 1.0  # seconds between interrupts while the agent's own cell keeps running
POLL = 0.1  # seconds between checks for a Stop while waiting on the kernel
IDLE_AFTER_REPLY = 1.0  # seconds a reply may precede its iopub `idle` before iopub is probed
IOPUB_LOST = 30.0  # seconds after a reply when a cell counts as over although iopub said nothing
PROBE_AFTER = 1.0  # seconds of waiting on another client's cell before asking the shell
SLOW_CONNECT = 0.5  # seconds a first connect may take before it counts as waiting
QUIET_AFTER_USER_CELL = 0.03  # a queued run-all starts its next cell within this time
RESENDS_AFTER_ABORT = 3  # an agent cell the kernel aborted unrun is sent again this often
RESTART_WAIT = 15.0  # seconds to wait for an automatic restart after the kernel died
OUTPUT_LOST_NOTE = (
    "[output lost] The kernel ran this cell, but the host's output channel missed its messages "
    "(as right after a kernel restart): the outputs shown may be incomplete or missing. Run what "
    "you need to see again."
)
# Marks the agent's own cells in their execute requests, so the kernel package interrupts them even
# while they await (must match prime_agent_kernel.interrupts.AGENT_CELL_KEY: the kernel package
# never imports the host's).
AGENT_CELL_METADATA = {"prime_agent_cell": True}


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
        setup_code: Callable[[], KernelSetup | str | None] | None = None,
        is_managed: Callable[[], bool] = lambda: True,
        shares_disk: Callable[[], bool] = lambda: True,
        on_new_process: Callable[[bool], None] | None = None,
    ) -> None:
        """`on_new_process(died)`: given for a kernel without local restarts (a gateway's),
        whose processes are told apart by the kernel package's process token; called once for
        each new process no agent cell reports (nobody else tells the host of it)."""
        self.km = kernel_manager
        self._shares_disk = shares_disk
        self.kernel_id = kernel_id
        self._is_managed = is_managed
        self._client: Any = None
        self._client_generation: object = None
        self._last_run_generation: object = None
        self._lock = asyncio.Lock()
        self._reaper: asyncio.Task[None] | None = None
        self._ticket: _Ticket | None = None
        self._own: set[str] = set()  # our requests in the kernel (not "someone else's cell")
        self._preparation = KernelPreparation(kernel_id, setup_code, on_new_process, self)
        self._process = self._preparation.process  # None: the kernel has local restarts
        self._activity = self._new_activity()
        self.restarts = 0
        self.restarting = False  # our own restart is in progress (not someone else's)

    # ------------------------------------------------------------ lifecycle

    def _generation(self) -> object:
        """Changes whenever the kernel process is replaced (restart by anyone)."""
        if self._process is not None:
            return self._process.current
        provisioner = getattr(self.km, "provisioner", None)
        pid = getattr(provisioner, "pid", None)
        return pid if pid is not None else id(provisioner)

    def _new_activity(self) -> _Activity:
        if self._process is None:
            return _Activity(self._own)
        return _Activity(self._own, self._process_status)

    def _process_status(self, msg: dict[str, Any]) -> None:
        """iopub `starting` (sent by the new kernel) or `restarting` (by the gateway's server,
        after its restarter replaced a dead kernel) of a kernel without local restarts."""
        if self._process is None:
            return
        if msg["content"].get("execution_state") == "restarting":
            self._process.restarting()
        else:
            self._process.replaced(session=msg["header"].get("session") or None)

    async def _alive(self) -> bool:
        """The kernel runs. A gateway's manager answers True once more after the gateway
        forgot the kernel (404), having dropped its model: that counts as dead."""
        alive = bool(await self.km.is_alive())
        if alive and self._process is not None:
            return getattr(self.km, "kernel", True) is not None
        return alive

    # ------------------------------------------------------------ for the preparation

    @property
    def own(self) -> set[str]:
        return self._own

    def observe(self, msg: dict[str, Any]) -> None:
        self._activity.observe(msg)

    async def ensure_client(self) -> Any:
        return await self._ensure_client()

    async def drain_activity(self, client: Any) -> bool:
        return await self._drain_activity(client)

    async def wait_reply(self, client: Any, msg_id: str, timeout: float) -> dict[str, Any]:
        return await self._wait_reply(client, msg_id, timeout)

    def process_followed(self) -> None:
        self._client_generation = self._generation()  # the websocket outlives the process

    @property
    def setup_problem(self) -> KernelPackageProblem | None:
        """What is wrong with the kernel package in this kernel (None: nothing, or not set up)."""
        return self._preparation.problem

    async def _ensure_setup(self, check_process: bool = True) -> None:
        await self._preparation.ensure(check_process)

    async def _ensure_client(self) -> Any:
        generation = self._generation()
        if self._client is not None and self._client_generation == generation:
            return self._client
        self._close_client()
        client = await new_client(self.km)
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

    async def _wait_reply(self, client: Any, msg_id: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no reply from the kernel")
            try:
                msg = await client.get_shell_msg(timeout=min(remaining, 1.0))
            except queue.Empty:
                if not await self._alive():
                    raise RuntimeError("the kernel died while loading the kernel package") from None
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg

    async def close(self) -> None:
        if self._reaper is not None and not self._reaper.done():
            self._reaper.cancel()
        self._close_client()

    def stop_cell(self, cause: StopCause = USER_STOP) -> None:
        """Stop the agent's cell of the `execute` in progress (see `execute`)."""
        if self._ticket is not None:
            self._ticket.stop_requested = True
            self._ticket.stop_cause = cause

    async def run_silently(
        self, code: str, timeout: float, expressions: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Run harness code (not a cell: nothing in the notebook or the history) on this
        executor's own client, so it never counts as another client's cell; the reply content
        (with the values of `expressions` in its `user_expressions`). The kernel package is
        loaded first, as for a cell: a snapshot restore imports skill modules, which only the
        package's skill finder can find. It asks for the lock in its first step: an agent cell
        asked for after that step runs after it."""
        async with self._lock:
            client = await self._ensure_client()
            await self._ensure_setup()
            msg_id = client.execute(
                code,
                silent=True,
                store_history=False,
                allow_stdin=False,
                user_expressions=expressions or {},
            )
            self._own.add(msg_id)
            try:
                return dict((await self._wait_reply(client, msg_id, timeout))["content"])
            finally:
                self._own.discard(msg_id)

    @property
    def lacks_package(self) -> bool:
        """The kernel has no kernel package (told once already: no snapshots there either)."""
        return self._preparation.lacks_package

    @property
    def shares_disk(self) -> bool:
        """The kernel sees the host's session folders (`KernelFleet.shares_disk`)."""
        return self._shares_disk()

    @property
    def generation(self) -> object:
        """Which kernel process this is (changes with every restart)."""
        return self._generation()

    def owns_request(self, msg_id: str) -> bool:
        """Whether `msg_id` is an execution of ours still in the kernel (the agent's cell)."""
        return msg_id in self._own

    def knows_current_process(self) -> bool:
        """Whether the agent already heard of the kernel process running now: an agent cell
        ran on it (and reported the restart that started it) or a notice told of it."""
        return self._last_run_generation == self._generation()

    def restart_reported(self) -> None:
        """The agent was told of a restart another way (a notice, and what a snapshot restore
        brought back): the next cell's "variables are gone" note would repeat or contradict it."""
        self._last_run_generation = self._generation()

    async def prepare(self) -> None:
        """Connect and load the kernel package ahead of the first cell (overlaps model time)."""
        async with self._lock:
            await self._ensure_client()
            await self._ensure_setup()

    async def wait_idle(self) -> None:
        """Return once no other client's cell runs in the kernel (a goal's continuation waits
        for the user's cell; core/goals.py). Takes the lock, so it also waits for a harness run
        or a stopped cell of the agent's still being reaped.

        A `kernel_info` round trip comes first: the kernel answers it only between cells, so
        a cell whose busy status has not reached this client yet is waited for all the same."""
        async with self._lock:
            if not await self._alive():
                return
            client = await self._ensure_client()
            probe = client.kernel_info()
            self._own.add(probe)
            try:
                await self._wait_reply(client, probe, math.inf)
            finally:
                self._own.discard(probe)
            await self._wait_until_idle(client, _Ticket(lambda state: None))

    # ------------------------------------------------------------ execution

    async def execute(
        self,
        code: str,
        on_event: Callable[[OutputEvent], None],
        timeout: float,
        on_state: Callable[[CellState], None] | None = None,
    ) -> ExecutionResult:
        """Run one agent cell; never touch a cell the agent did not start.

        The cell is submitted only once the kernel is idle; until then `on_state("waiting")`.
        `stop_cell()` withdraws a cell that was not submitted yet (status `skipped`), and
        interrupts it once it is observed running otherwise. Only the agent's own cell that
        ignores the interrupt gets the kernel restarted (`restarted="agent"`).
        """
        ticket = _Ticket(on_state or (lambda state: None))
        self._ticket = ticket
        try:
            return await self._execute(code, on_event, timeout, ticket)
        except Exception as exc:
            if (gone := gateway_gone(exc, getattr(self.km, "kernel_url", None))) is not None:
                raise gone from exc
            raise
        finally:
            if self._ticket is ticket:
                self._ticket = None

    async def _execute(
        self, code: str, on_event: Callable[[OutputEvent], None], timeout: float, ticket: _Ticket
    ) -> ExecutionResult:
        if not await self._acquire(ticket):
            return _withdrawn(ticket.stop_cause)
        hand_off: tuple[Any, _Run] | None = None
        reaping = False
        try:
            notes: list[str] = []
            told: list[KernelPackageProblem] = []
            ready = self._ready_to_submit(ticket, notes, told)
            if not await self._until_stopped(ticket, ready):
                return _withdrawn(ticket.stop_cause)
            expressions = {TOKEN: TOKEN_EXPRESSION} if self._process is not None else {}
            for attempt in range(1 + RESENDS_AFTER_ABORT):
                client = self._client
                generation = self._client_generation
                msg_id = _send_agent_cell(client, code, expressions)
                self._own.add(msg_id)
                run = _Run(msg_id, on_event)
                hand_off = (client, run)
                result = await self._run(client, run, generation, timeout, ticket)
                hand_off = None
                self._own.discard(msg_id)
                if result.status != "aborted" or run.executed or attempt == RESENDS_AFTER_ABORT:
                    break
                # Nothing ran: ipykernel aborts what reaches it shortly after another client's
                # cell failed, even though we sent ours once that cell was over. Send it again.
                waited = self._wait_until_idle(client, ticket)
                if not await self._until_stopped(ticket, waited):
                    return _withdrawn(ticket.stop_cause)
            if await self._preparation.ran_in_new_process(client, run.reply, result.status):
                notes.append(UNPREPARED_PROCESS_NOTE)
            self._last_run_generation = self._generation()
            dropped = output_rate_limit.rate_limited(result.outputs)
            ending = output_rate_limit.note() if dropped else ""
            result.note = "\n".join(n for n in (*notes, result.note, ending) if n)
            if told:
                result.notice = told[0].notice
            elif dropped:
                result.notice = output_rate_limit.notice()
            return result
        except asyncio.CancelledError:
            if hand_off is not None:  # our request is in the kernel: the reaper owns the lock now
                self._reaper = asyncio.ensure_future(self._reap(*hand_off))
                reaping = True
            raise
        finally:
            if not reaping:
                self._lock.release()

    async def _ready_to_submit(
        self, ticket: _Ticket, notes: list[str], told: list[KernelPackageProblem]
    ) -> bool:
        """Connected, the kernel idle and the kernel package loaded; False if stopped. A
        problem with the package not told yet goes into `notes` (the model's) and `told`."""
        if not await self._alive():
            await self._recover_dead_kernel()
        client = await self._ensure_client()
        if not await self._wait_until_idle(client, ticket):
            return False
        # A gateway's kernel: the cell's own request reads the process token (one round trip
        # per cell, not two); a process replaced as iopub said is set up here all the same.
        await self._ensure_setup(check_process=False)
        if self._last_run_generation not in (None, self._generation()):
            notes.append(
                "[kernel restarted] The kernel was restarted since the last agent cell: "
                "variables and imports from before are gone."
            )
        if ticket.stop_requested:
            return False  # the problem is told with the next cell that runs
        untold = self._preparation.untold_problem()
        if untold is not None:
            notes.append(untold.note)
            told.append(untold)
        return True

    async def _until_stopped(self, ticket: _Ticket, work: Awaitable[bool]) -> bool:
        """Await `work` unless the cell is stopped first (then cancel it and return False).

        A new client's first `kernel_info` waits behind a cell the user is running, so a
        connect that takes long is reported as waiting too."""
        task = asyncio.ensure_future(work)
        started = time.monotonic()
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=POLL)
                if task.done():
                    break
                if ticket.stop_requested:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                    return False
                if time.monotonic() - started > SLOW_CONNECT:
                    ticket.set_state("waiting")
        except asyncio.CancelledError:
            task.cancel()
            raise
        return task.result()

    async def _acquire(self, ticket: _Ticket) -> bool:
        """Take the lock; False if the cell was stopped while an earlier one still held it.

        Harness runs hold it briefly (the snapshot taken as a turn starts goes just before the
        turn's first cell), so only a wait that lasts is reported as waiting."""
        if not self._lock.locked():
            await self._lock.acquire()
            return True
        acquiring = asyncio.ensure_future(self._lock.acquire())
        started = time.monotonic()
        while not acquiring.done():
            await asyncio.wait({acquiring}, timeout=POLL)
            if not acquiring.done() and time.monotonic() - started > SLOW_CONNECT:
                ticket.set_state("waiting")
            if ticket.stop_requested and not acquiring.done():
                acquiring.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await acquiring
                if acquiring.cancelled():
                    return False
        return True

    async def _wait_until_idle(self, client: Any, ticket: _Ticket) -> bool:
        """Hold the agent's cell while the kernel runs someone else's; False if stopped.

        Busy and idle come from every client's requests on iopub. A status lost on a full
        iopub queue cannot keep us waiting for ever: while waiting, a `kernel_info` probe on the
        shell channel (served only between cells) proves the cells seen busy before it are over.
        After another client's cell ends, a short quiet period lets a queued run-all go on
        instead of our cell slipping between its cells.
        """
        activity = self._activity
        await self._drain_activity(client)
        probe: tuple[str, set[str]] | None = None  # a kernel_info in flight, busy ids before it
        probe_at = time.monotonic() + PROBE_AFTER
        try:
            while True:
                if ticket.stop_requested:
                    return False
                quiet = activity.quiet()
                if not activity.foreign_busy and quiet:
                    return True
                if activity.foreign_busy:
                    ticket.set_state("waiting")
                if probe is None and time.monotonic() >= probe_at:
                    probe = (client.kernel_info(), set(activity.busy))
                    self._own.add(probe[0])
                if probe is not None:
                    with contextlib.suppress(queue.Empty):
                        reply = await client.get_shell_msg(timeout=0)
                        if reply["parent_header"].get("msg_id") == probe[0]:
                            activity.busy -= probe[1]
                            self._own.discard(probe[0])
                            probe, probe_at = None, time.monotonic() + PROBE_AFTER
                # Not quiet yet: wake when the quiet period ends, or earlier on a message.
                wait = min(POLL, activity.quiet_in()) if not quiet else 0.01
                got = await self._drain_activity(client, wait=wait)
                if not got and not await self._alive():
                    return True  # the caller's liveness checks report the death
        finally:
            if probe is not None:  # its reply is not waited for: it is no cell of ours any more
                self._own.discard(probe[0])

    async def _drain_activity(self, client: Any, wait: float = 0.0) -> bool:
        """Read iopub into the activity tracker (outputs of other clients' cells are dropped)."""
        got = False
        try:
            msg = await client.get_iopub_msg(timeout=wait)
            while True:
                got = True
                self._activity.observe(msg)
                msg = await client.get_iopub_msg(timeout=0)
        except queue.Empty:
            pass
        return got

    async def _run(
        self, client: Any, run: _Run, generation: object, timeout: float, ticket: _Ticket
    ) -> ExecutionResult:
        deadline: float | None = None
        while not run.done:
            if run.started and deadline is None:
                deadline = time.monotonic() + timeout  # time queued behind user cells is free
                ticket.set_state("running")
            elif not run.started and self._activity.foreign_busy:
                ticket.set_state("waiting")  # another client's cell slipped in before ours
            if ticket.stop_requested and run.started:
                return await self._on_stop(client, run, ticket.stop_cause)
            remaining = POLL if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return await self._on_timeout(client, run, timeout)
            got = await self._pump(client, run, min(remaining, POLL))
            if run.reply is not None and not run.idle:
                self._confirm_over(client, run)
            elif not got and await self._kernel_died(generation):
                return await self._on_death(run)
        if run.started and deadline is None:
            ticket.set_state("running")  # it ran between two reads (a busy machine): say so
        return run.result()

    async def _reap(self, client: Any, run: _Run) -> None:
        """After a cancel: interrupt our own cell once it runs, drain it, then free the lock.

        No deadline: the user's cell ahead of ours may run for hours, and ours must not be
        interrupted before it is observed running (the interrupt would hit theirs).
        """
        try:
            while not run.done and not run.started:
                if not await self._pump(client, run, POLL) and not await self._alive():
                    return
            if not run.done and not await self._interrupt_own_cell(client, run):
                log.warning("kernel %s ignored the interrupt; restarting it", self.kernel_id)
                await self._restart()
        except Exception:
            log.warning(
                "stopping the agent cell on kernel %s failed", self.kernel_id, exc_info=True
            )
        finally:
            self._own.discard(run.msg_id)
            self._lock.release()

    def _confirm_over(self, client: Any, run: _Run) -> None:
        """The cell's reply came but not its iopub `idle`: a moment later ask the kernel for
        `kernel_info`, whose own iopub status follows everything the cell published (iopub is
        ordered), so seeing it means nothing of the cell's is still on its way. When iopub says
        nothing at all (its subscription lost what the kernel published, as after a restart),
        the reply alone ends the cell after IOPUB_LOST."""
        now = time.monotonic()
        if run.reply_at is None:
            run.reply_at = now
        elif run.probe_id is None and now - run.reply_at >= IDLE_AFTER_REPLY:
            run.probe_id = client.kernel_info()
            self._own.add(run.probe_id)
        elif now - run.reply_at >= IOPUB_LOST:
            log.warning(
                "kernel %s: no iopub status for the agent's cell; its reply ends it", self.kernel_id
            )
            run.idle = run.iopub_lost = True

    async def _pump(self, client: Any, run: _Run, wait: float) -> bool:
        """Read what is available on iopub and shell; True if anything arrived."""
        got = False
        try:
            msg = await client.get_iopub_msg(timeout=wait if not run.idle else 0.05)
            self._activity.observe(msg)
            run.on_iopub(msg)
            got = True
            # Drain whatever else is already queued without waiting.
            while True:
                msg = await client.get_iopub_msg(timeout=0)
                self._activity.observe(msg)
                run.on_iopub(msg)
        except queue.Empty:
            pass
        if run.reply is None:
            # Also before `idle`, without waiting: a reply whose iopub status was lost still
            # ends the cell (`_confirm_over`).
            try:
                msg = await client.get_shell_msg(timeout=(0.05 if got else wait) if run.idle else 0)
                if msg["parent_header"].get("msg_id") == run.msg_id:
                    run.reply = msg
                    if msg["content"].get("status") != "aborted":  # an aborted one never ran
                        run.started = run.executed = True
                got = True
            except queue.Empty:
                if run.idle:
                    run.idle_without_reply += 1
        return got

    async def _kernel_died(self, generation: object) -> bool:
        return self._generation() != generation or not await self._alive()

    async def _interrupt_own_cell(self, client: Any, run: _Run) -> bool:
        """SIGINT while our own cell is running, until it ends or INTERRUPT_GRACE passes.

        The signal is re-sent each second: one that lands while the kernel is between
        announcing the cell and entering it is ignored by ipykernel. Each signal is sent only
        after reading iopub, while our cell is still the one running. True if it ended.
        """
        deadline = time.monotonic() + INTERRUPT_GRACE
        next_signal = 0.0
        while time.monotonic() < deadline:
            await self._pump(client, run, 0)
            if run.finished:
                return True
            if time.monotonic() >= next_signal:
                await self.km.interrupt_kernel()
                next_signal = time.monotonic() + RESIGNAL_EVERY
            await self._pump(client, run, 0.1)
        return run.finished

    async def _on_stop(self, client: Any, run: _Run, cause: StopCause) -> ExecutionResult:
        return await self._end_own_cell(
            client,
            run,
            "interrupted",
            interrupted=f"[stopped] {cause.sentence}; this cell was interrupted.",
            restarted=f"[stopped] {cause.sentence}. This cell ignored the interrupt, so "
            "the kernel was restarted: all variables and imports are gone (the user's too).",
        )

    async def _on_timeout(self, client: Any, run: _Run, timeout: float) -> ExecutionResult:
        return await self._end_own_cell(
            client,
            run,
            "timeout",
            interrupted=f"[timeout] The cell ran longer than {timeout:g} s and was interrupted "
            "(KeyboardInterrupt). The kernel and its variables are intact.",
            restarted=f"[timeout] The cell ran longer than {timeout:g} s and did not stop when "
            "interrupted, so the kernel was restarted: all variables are gone.",
        )

    async def _end_own_cell(
        self,
        client: Any,
        run: _Run,
        status: ExecutionStatus,
        *,
        interrupted: str,
        restarted: str,
    ) -> ExecutionResult:
        """Interrupt our running cell; restart the kernel only if it ignores that."""
        stopped = await self._interrupt_own_cell(client, run)
        if not stopped:
            await self._restart()
        result = run.result()
        result.status = status
        result.note = interrupted if stopped else restarted
        if not stopped:
            result.restarted = "agent"
        return result

    async def _on_death(self, run: _Run) -> ExecutionResult:
        # A new process already runs: someone restarted it (unless a gateway said it restarts
        # the kernel after a death).
        external = await self._alive() and not (self._process is not None and self._process.died)
        await self._recover_dead_kernel()
        result = run.result()
        result.status = "died"
        if external:
            result.restarted = "external"
            result.note = (
                "[kernel restarted] The kernel was restarted (by the user or another client) "
                "while this cell ran: all variables and imports are gone, so re-create what "
                "you need."
            )
        else:
            result.restarted = "died"
            result.note = (
                "[kernel died] The kernel process exited while this cell ran. It was restarted: "
                "all variables and imports are gone, so re-create what you need."
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
        if self._process is not None:
            self._process.told = True  # the cell (or the next one) reports it
            if not await self._alive():
                raise KernelGone(
                    "the kernel is gone from the gateway (shut down or culled there); start a "
                    "kernel for the notebook and send the message again"
                )
        restarter = getattr(self.km, "_restarter", None)
        if restarter is not None and getattr(self.km, "autorestart", False):
            deadline = time.monotonic() + RESTART_WAIT
            while time.monotonic() < deadline:
                if not self._is_managed():
                    raise KernelGone("the notebook's kernel was shut down while a cell ran")
                if self._generation() != self._client_generation and await self._alive():
                    self.restarts += 1
                    return
                await asyncio.sleep(0.1)
        if not await self._alive() or self._generation() == self._client_generation:
            await self._restart()
        else:
            self.restarts += 1

    async def _restart(self) -> None:
        self._close_client()
        if not self._is_managed():
            raise KernelGone("the notebook's kernel was shut down")
        self.restarting = True
        try:
            await self.km.restart_kernel(now=True)
        finally:
            self.restarting = False
        if self._process is not None:
            self._process.replaced(told=True)
        self.restarts += 1
        self._activity = self._new_activity()

    @property
    def executing(self) -> bool:
        """An agent cell is in `execute` (it reports kernel restarts in its own result)."""
        return self._ticket is not None


def _send_agent_cell(client: Any, code: str, expressions: dict[str, str]) -> str:
    """`client.execute` with the agent-cell mark in the request's metadata; the request's id."""
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": expressions,
        "allow_stdin": False,
        "stop_on_error": False,
    }
    msg = client.session.msg("execute_request", content, metadata=dict(AGENT_CELL_METADATA))
    client.shell_channel.send(msg)
    return str(msg["header"]["msg_id"])


def _withdrawn(cause: StopCause) -> ExecutionResult:
    return ExecutionResult(
        status="skipped",
        note=f"[not run] {cause.sentence} while this cell waited for the kernel; it was "
        "never sent to the kernel, so nothing in it ran.",
    )


@dataclass
class _Ticket:
    """One `execute` call: whether it was asked to stop, and the last state reported."""

    on_state: Callable[[CellState], None]
    stop_requested: bool = False
    stop_cause: StopCause = USER_STOP
    state: CellState | None = None

    def set_state(self, state: CellState) -> None:
        if state != self.state:
            self.state = state
            self.on_state(state)


class _Activity:
    """What the kernel is busy with, from the status messages of every client's requests.

    `own` holds the ids of the executor's own requests; everything else is someone else's
    cell (the user's tab, a console, another client)."""

    def __init__(
        self, own: set[str], on_process: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        self.own = own
        self._on_process = on_process  # told `starting` / `restarting` (a gateway's kernel)
        self.busy: set[str] = set()
        self.last_foreign_idle = 0.0  # wall-clock time the kernel sent it

    def observe(self, msg: dict[str, Any]) -> None:
        if msg["header"]["msg_type"] != "status":
            return
        parent = msg["parent_header"].get("msg_id", "")
        state = msg["content"].get("execution_state")
        if state == "busy":
            self.busy.add(parent)
        elif state == "idle":
            self.busy.discard(parent)
            if parent not in self.own:
                self.last_foreign_idle = max(self.last_foreign_idle, _sent_at(msg))
        elif state in ("starting", "restarting"):  # a new kernel process: nothing runs yet
            self.busy.clear()
            if self._on_process is not None:
                self._on_process(msg)

    @property
    def foreign_busy(self) -> bool:
        return bool(self.busy - self.own)

    def quiet(self) -> bool:
        return time.time() - self.last_foreign_idle >= QUIET_AFTER_USER_CELL

    def quiet_in(self) -> float:
        """Seconds until the quiet period after another client's cell is over (0: it is)."""
        return max(0.0, QUIET_AFTER_USER_CELL - (time.time() - self.last_foreign_idle))


def _sent_at(msg: dict[str, Any]) -> float:
    date = msg["header"].get("date")
    try:
        return float(date.timestamp())
    except AttributeError:
        return time.time()


class _Run:
    """The state of one execute_request while its messages arrive."""

    def __init__(self, msg_id: str, on_event: Callable[[OutputEvent], None]) -> None:
        self.msg_id = msg_id
        self.on_event = on_event
        self.fold = OutputFold()
        self.execution_count: int | None = None
        self.idle = False
        self.started = False
        self.began = False  # iopub showed the cell's beginning (its `busy`, or its input)
        self.executed = False  # the kernel ran it (an aborted request never does)
        self.reply: dict[str, Any] | None = None
        self.idle_without_reply = 0
        self.reply_at: float | None = None  # when the reply came while `idle` had not
        self.probe_id: str | None = None  # a kernel_info asked for to see iopub caught up
        self.iopub_lost = False  # iopub missed the cell's messages: its `busy` or its `idle`

    @property
    def done(self) -> bool:
        return self.idle and self.reply is not None

    @property
    def finished(self) -> bool:
        """Over in the kernel. A KeyboardInterrupt that lands while ipykernel sends the reply
        loses the reply, but `idle` for our request still follows, so idle is enough once the
        reply had a moment to arrive."""
        return self.done or (self.idle and self.idle_without_reply >= 3)

    def on_iopub(self, msg: dict[str, Any]) -> None:
        parent = msg["parent_header"].get("msg_id")
        if parent is not None and parent == self.probe_id:
            if msg["header"]["msg_type"] == "status" and not self.idle:
                # iopub has caught up past the cell: nothing more of it comes
                self.idle = self.iopub_lost = True
            return
        if parent != self.msg_id:
            return
        msg_type = msg["header"]["msg_type"]
        content = msg["content"]
        if msg_type == "status":
            state = content.get("execution_state")
            if state == "busy":
                self.started = self.began = True
            elif state == "idle":
                self.idle = True
                # Its `idle` without its `busy`: iopub missed the cell's beginning (a
                # subscription that came back while the cell ran), and with it what it printed.
                self.iopub_lost = self.iopub_lost or not self.began
        elif msg_type == "execute_input":
            self.started = self.executed = self.began = True
            self.execution_count = content.get("execution_count")
        elif msg_type in OUTPUT_TYPES:
            display_id = (content.get("transient") or {}).get("display_id")
            self._emit(OutputEvent("output", output=output_from_msg(msg), display_id=display_id))
        elif msg_type == "clear_output":
            self._emit(OutputEvent("clear", wait=bool(content.get("wait"))))
        elif msg_type == "update_display_data":
            display_id = (content.get("transient") or {}).get("display_id")
            if display_id:
                output = output_from_msg(msg)
                self._emit(OutputEvent("update_display", output=output, display_id=display_id))

    def _emit(self, event: OutputEvent) -> None:
        """What the model sees and what the notebook stores come from the same fold."""
        self.fold.apply(event)
        self.on_event(event)

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
        outputs = self.fold.outputs()
        if self.reply is None and any(o.get("output_type") == "error" for o in outputs):
            status = "error"
        note = ""
        if status == "aborted":
            note = (
                "[not run] The kernel skipped this cell because a cell queued before it (run by "
                "the user) raised an error. Nothing in it ran; run it again if it is still needed."
            )
        if self.iopub_lost and status != "aborted":
            note = OUTPUT_LOST_NOTE
        return ExecutionResult(
            status=status,
            execution_count=self.execution_count,
            outputs=outputs,
            note=note,
        )
