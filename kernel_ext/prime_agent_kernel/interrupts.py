"""How the agent's own cells take an interrupt (Stop, the cell time limit).

ipykernel 7 runs a cell that uses top-level `await` as a task on the kernel's event loop and, for
that time, replaces the SIGINT handler with one that only asks the loop to cancel the task
(`IPythonKernel._cancel_on_sigint`). That request is never served while the cell blocks the loop
(`time.sleep`, a slow call: the loop is not running), and even while the cell awaits it waits for
something else to wake the loop, because it is queued with tornado's `add_callback`, which is a
plain `call_soon` from a signal handler (ipykernel #881, #1239). To the host the kernel then looks
deaf to the interrupt, and it restarted the kernel: every variable gone, the user's too.

For the agent's own cells (the host marks their execute requests with `AGENT_CELL_KEY`), this
module puts its own handler in place once the cell runs:

- while the cell's code is running (it blocks the loop), it raises KeyboardInterrupt there, as the
  kernel does in a cell without `await`; IPython's `run_code` catches it and the cell ends;
- while the cell waits in the loop, it cancels the cell's task and wakes the loop, so the await
  ends at once with CancelledError (what ipykernel means to do).

The user's cells keep ipykernel's handling: the agent never changes how a cell it did not start
is interrupted. A cell that ignores SIGINT (C code holding the GIL, `signal.signal(SIGINT,
SIG_IGN)`) still ignores it; for those the host restarts the kernel and restores the snapshot
taken at the start of the turn.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from types import FrameType
from typing import Any

AGENT_CELL_KEY = "prime_agent_cell"
"""Execute-request metadata (`{AGENT_CELL_KEY: True}`) the host sets on the agent's own cells.
Not the notebook cell's `prime_agent` tag: JupyterLab copies a cell's metadata into the request,
so a user re-running an agent cell would carry that one."""

CELL_CODE_NAME = "<module>"  # the code object IPython compiles a cell's statements into


class AgentCellInterrupts:
    """Per shell: SIGINT handling for the agent's own cells that use top-level `await`."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        # The code of the frame that runs a cell's statements (None: an IPython without it).
        self._run_code = getattr(getattr(type(shell), "run_code", None), "__code__", None)
        self._task: asyncio.Task[Any] | None = None
        self._kernels_handler: Any = None

    def register(self) -> None:
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)

    def pre_run_cell(self, info: Any = None) -> None:
        if not _main_thread() or self._run_code is None or not self._is_agent_cell():
            return  # signals belong to the main thread (a subshell's cell runs in another)
        current = signal.getsignal(signal.SIGINT)
        if current is signal.default_int_handler or not callable(current):
            return  # a cell without `await`: the kernel raises KeyboardInterrupt in it already
        task = _current_task()
        if task is None:
            return
        self._task, self._kernels_handler = task, current
        signal.signal(signal.SIGINT, self._on_sigint)

    def post_run_cell(self, result: Any = None) -> None:
        if not _main_thread():
            return
        if self._kernels_handler is not None and signal.getsignal(signal.SIGINT) == self._on_sigint:
            signal.signal(signal.SIGINT, self._kernels_handler)
        self._task = self._kernels_handler = None

    def _is_agent_cell(self) -> bool:
        kernel = getattr(self.shell, "kernel", None)
        if kernel is None:
            return False
        try:
            request = kernel.get_parent("shell")
        except Exception:  # another kernel implementation
            return False
        metadata = request.get("metadata") if isinstance(request, dict) else None
        return isinstance(metadata, dict) and metadata.get(AGENT_CELL_KEY) is True

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        task = self._task
        if task is None or task.done():
            if callable(self._kernels_handler):
                self._kernels_handler(signum, frame)
            return
        if self._running_cell_code(frame):
            # Stop (or the time limit) interrupts this agent cell, as it would without `await`.
            raise KeyboardInterrupt
        # The loop may sit in its selector: call_soon_threadsafe also wakes it.
        task.get_loop().call_soon_threadsafe(self._cancel, task)

    def _running_cell_code(self, frame: FrameType | None) -> bool:
        """Whether the main thread is in the cell's own statements (or what they call), so a
        KeyboardInterrupt raised here ends in `run_code`, which catches it."""
        while frame is not None:
            caller = frame.f_back
            if (
                caller is not None
                and caller.f_code is self._run_code
                and frame.f_code.co_name == CELL_CODE_NAME
            ):
                return True
            frame = caller
        return False

    def _cancel(self, task: asyncio.Task[Any]) -> None:
        """Cancel the cell's task if it waits inside the cell's code (a cancel that landed in
        IPython's own awaits around it would escape `run_code` into the kernel)."""
        if not task.done() and self._awaiting_in_cell(task):
            task.cancel("interrupted")

    def _awaiting_in_cell(self, task: asyncio.Task[Any]) -> bool:
        awaited: Any = task.get_coro()
        while awaited is not None:
            frame = getattr(awaited, "cr_frame", None)
            if frame is not None and frame.f_code is self._run_code:
                return True
            awaited = getattr(awaited, "cr_await", None)
        return False


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop
        return None


_installed: dict[int, AgentCellInterrupts] = {}


def install(shell: Any) -> AgentCellInterrupts:
    """The handler of `shell`, registered once."""
    handler = _installed.get(id(shell))
    if handler is None or handler.shell is not shell:
        handler = _installed[id(shell)] = AgentCellInterrupts(shell)
        handler.register()
    return handler
