"""A kernel port whose kernel is still being acquired (taken from a pool, booting).

A sub-agent is admitted at once and its kernel arrives in the background; the first cell waits for
it. A Stop meanwhile withdraws the cell (status `skipped`) instead of waiting for the kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from .ports import (
    CellState,
    ExecutionResult,
    IdleWaiter,
    KernelPort,
    KernelUnavailable,
    OutputEvent,
    RequestOwner,
)
from .stop_cause import USER_STOP, StopCause


class PendingKernel:
    def __init__(
        self,
        acquire: Awaitable[KernelPort],
        on_ready: Callable[[KernelPort], None] | None = None,
        what: str = "the kernel",
    ) -> None:
        self._what = what
        self._on_ready = on_ready
        self._acquire: asyncio.Future[KernelPort] = asyncio.ensure_future(acquire)
        self._acquire.add_done_callback(self._acquired)
        self._stop_while_waiting: asyncio.Event | None = None
        self._stop_cause = USER_STOP

    def _acquired(self, future: asyncio.Future[KernelPort]) -> None:
        if future.cancelled() or future.exception() is not None or self._on_ready is None:
            return
        self._on_ready(future.result())

    @property
    def kernel(self) -> KernelPort | None:
        """The kernel, once it is there."""
        done = self._acquire.done() and not self._acquire.cancelled()
        return self._acquire.result() if done and self._acquire.exception() is None else None

    @property
    def kernel_id(self) -> str:
        kernel = self.kernel
        return kernel.kernel_id if kernel is not None else ""

    async def ready(self) -> KernelPort:
        """The kernel; a failure to get one is KernelUnavailable (it ends the turn)."""
        try:
            return await asyncio.shield(self._acquire)
        except asyncio.CancelledError:
            if not self._acquire.cancelled():
                raise
            raise KernelUnavailable(f"{self._what} was released before it started") from None
        except KernelUnavailable:
            raise
        except Exception as exc:
            raise KernelUnavailable(
                f"{self._what} could not start: {type(exc).__name__}: {exc}"
            ) from exc

    async def execute(
        self,
        code: str,
        on_event: Callable[[OutputEvent], None],
        timeout: float,
        on_state: Callable[[CellState], None] | None = None,
    ) -> ExecutionResult:
        if not self._acquire.done():
            self._stop_while_waiting = asyncio.Event()
            stopped = asyncio.ensure_future(self._stop_while_waiting.wait())
            try:
                await asyncio.wait({self._acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopped.cancel()
                self._stop_while_waiting = None
            if not self._acquire.done():
                return ExecutionResult(
                    status="skipped",
                    note=f"[not run] {self._stop_cause.sentence} while {self._what} was starting.",
                )
        kernel = await self.ready()
        return await kernel.execute(code, on_event, timeout, on_state)

    def owns_request(self, msg_id: str) -> bool:
        kernel = self.kernel
        return isinstance(kernel, RequestOwner) and kernel.owns_request(msg_id)

    async def wait_idle(self) -> None:
        """Once the kernel arrived, until no other client's cell runs in it (one that never
        arrives runs no one's cell)."""
        try:
            kernel = await self.ready()
        except KernelUnavailable:
            return
        if isinstance(kernel, IdleWaiter):
            await kernel.wait_idle()

    def stop_cell(self, cause: StopCause = USER_STOP) -> None:
        self._stop_cause = cause
        if self._stop_while_waiting is not None:
            self._stop_while_waiting.set()
        kernel = self.kernel
        if kernel is not None:
            kernel.stop_cell(cause)

    async def release(self) -> KernelPort | None:
        """Stop waiting; the kernel if it had arrived (the caller shuts it down)."""
        if not self._acquire.done():
            self._acquire.cancel()
        with contextlib.suppress(BaseException):
            return await self._acquire
        return None


def kernel_arrived(kernel: KernelPort) -> bool:
    """A kernel that code ran or can run in (one still starting holds nothing)."""
    if isinstance(kernel, PendingKernel):
        return kernel.kernel is not None
    return bool(kernel.kernel_id)
