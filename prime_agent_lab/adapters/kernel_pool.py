"""A pool of pre-started kernels, so a sub-agent's spawn does not wait for a cold kernel start.

Generic over what a kernel is (`K`): the pool only calls the three functions it is given, so the
server (kernel ids of jupyter_server's kernel manager) and the CLI (local kernel managers) share it.

Rules (docs/kernel-pool.md):
- `take()` hands out a ready kernel at once (a dead one is discarded and skipped), else the oldest
  kernel already starting, else starts one cold. Every kernel is handed out at most once.
- After each take the pool starts kernels in the background until `size` are ready or starting.
- A failed start reaches the taker that waited for it as `KernelStartFailed`; refills after
  failures wait `retry_delay`, doubling up to `max_retry_delay`, and one success ends the backoff.
- `close()` waits for the starts nobody took, then discards every kernel not handed out.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K")


class KernelStartFailed(RuntimeError):
    """A kernel could not be started for the caller of `take()`."""


class PoolClosed(RuntimeError):
    """`take()` on a pool that was closed."""


@dataclass(frozen=True)
class PoolStats:
    size: int
    ready: int
    starting: int
    warm_hits: int  # taken ready, without waiting
    waits: int  # taken while it was still starting (a refill already under way)
    cold_starts: int  # started for the taker because nothing was ready or starting
    failed_starts: int
    last_error: str | None
    retry_in: float | None  # seconds until the next refill attempt after failures


class KernelPool(Generic[K]):
    def __init__(
        self,
        start: Callable[[], Awaitable[K]],
        discard: Callable[[K], Awaitable[object]],
        *,
        size: int = 2,
        alive: Callable[[K], Awaitable[bool]] | None = None,
        retry_delay: float = 0.5,
        max_retry_delay: float = 30.0,
    ) -> None:
        if size < 0:
            raise ValueError(f"kernel pool size must be 0 or more, not {size}")
        self._start = start
        self._discard = discard
        self._alive = alive
        self._size = size
        self._retry_delay = retry_delay
        self._max_retry_delay = max_retry_delay
        self._ready: deque[K] = deque()
        self._unclaimed: list[asyncio.Task[K]] = []  # starts no taker waits for (yet)
        self._discards: set[asyncio.Task[None]] = set()
        self._failures = 0  # consecutive failed starts
        self._retry: asyncio.TimerHandle | None = None
        self._retry_in: float | None = None
        self._closed = False
        self._closing: asyncio.Task[None] | None = None
        self.warm_hits = 0
        self.waits = 0
        self.cold_starts = 0
        self.failed_starts = 0
        self.last_error: str | None = None

    @property
    def size(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        return self._closed

    def stats(self) -> PoolStats:
        return PoolStats(
            size=self._size,
            ready=len(self._ready),
            starting=len(self._unclaimed),
            warm_hits=self.warm_hits,
            waits=self.waits,
            cold_starts=self.cold_starts,
            failed_starts=self.failed_starts,
            last_error=self.last_error,
            retry_in=self._retry_in,
        )

    def disable(self, reason: str) -> None:
        """Start no more kernels ahead of time (a taker still gets one started for it), said in
        one log line; no retries follow."""
        if self._size == 0:
            return
        self._size = 0
        self._cancel_retry()
        log.warning("kernel pool disabled: %s", reason)

    def fill(self) -> None:
        """Start pre-starting kernels in the background (call from a running event loop)."""
        self._refill()

    async def take(self) -> K:
        """A kernel for the caller alone; raises `KernelStartFailed` or `PoolClosed`."""
        if self._closed:
            raise PoolClosed("the kernel pool is closed")
        try:
            return await self._take()
        finally:
            self._refill()

    async def _take(self) -> K:
        while self._ready:
            kernel = self._ready.popleft()
            self._refill()  # the replacement starts now, while the caller uses this one
            if await self._is_alive(kernel):
                self.warm_hits += 1
                return kernel
            log.info("kernel pool: a pre-started kernel died; discarding it")
            self._discard_later(kernel)
        if self._unclaimed:
            task = self._unclaimed.pop(0)
            self.waits += 1
            self._refill()
        else:
            # Refilling waits until this start is done (take's finally), so the caller's own
            # kernel does not share the cores with the pool's.
            task = asyncio.ensure_future(self._start_one())
            self.cold_starts += 1
        return await self._claim(task)

    async def _claim(self, task: asyncio.Task[K]) -> K:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():  # the taker gave up; its kernel goes back to the pool
                self._adopt(task)
            raise
        except Exception as exc:
            raise KernelStartFailed(f"could not start a kernel: {describe(exc)}") from exc

    async def _is_alive(self, kernel: K) -> bool:
        if self._alive is None:
            return True
        try:
            return bool(await self._alive(kernel))
        except Exception:
            log.debug("kernel pool: liveness check failed", exc_info=True)
            return False

    async def _start_one(self) -> K:
        try:
            kernel = await self._start()
        except Exception as exc:
            self._failures += 1
            self.failed_starts += 1
            self.last_error = describe(exc)
            log.warning("kernel pool: a kernel failed to start: %s", self.last_error)
            raise
        if self._failures:
            self._failures = 0
            self._cancel_retry()
            self._refill()
        return kernel

    # ------------------------------------------------------------ refilling

    def _refill(self) -> None:
        if self._closed or self._retry is not None or self._size == 0:
            return  # (size 0: nothing is started ahead of time, so nothing backs off)
        if self._failures:  # never start again right after a failure: back off
            self._schedule_retry()
            return
        self._top_up()

    def _top_up(self) -> None:
        for _ in range(self._size - len(self._ready) - len(self._unclaimed)):
            self._adopt(asyncio.ensure_future(self._start_one()))

    def _schedule_retry(self) -> None:
        delay = min(self._retry_delay * 2 ** (self._failures - 1), self._max_retry_delay)
        self._retry_in = delay
        log.info(
            "kernel pool: %d failed start(s) in a row; next try in %g s", self._failures, delay
        )
        self._retry = asyncio.get_running_loop().call_later(delay, self._retry_now)

    def _retry_now(self) -> None:
        self._retry, self._retry_in = None, None
        if not self._closed:
            self._top_up()

    def _cancel_retry(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        self._retry, self._retry_in = None, None

    def _adopt(self, task: asyncio.Task[K]) -> None:
        """Keep a start nobody waits for: its kernel becomes ready (or is discarded if closed)."""
        self._unclaimed.append(task)
        task.add_done_callback(self._unclaimed_done)

    def _unclaimed_done(self, task: asyncio.Task[K]) -> None:
        if task not in self._unclaimed:
            return  # a taker claimed it meanwhile and got its result
        self._unclaimed.remove(task)
        if task.cancelled():
            return
        if task.exception() is not None:
            self._refill()  # schedules the backoff retry
            return
        kernel = task.result()
        if self._closed:
            self._discard_later(kernel)
        else:
            self._ready.append(kernel)

    # ------------------------------------------------------------ shutting down

    async def close(self) -> None:
        """Stop refilling and shut down every kernel not handed out. Idempotent."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        self._closed = True
        self._cancel_retry()
        starting, self._unclaimed = self._unclaimed, []
        results = await asyncio.gather(*starting, return_exceptions=True)
        leftovers = [r for r in results if not isinstance(r, BaseException)]
        leftovers.extend(self._ready)
        self._ready.clear()
        for kernel in leftovers:
            self._discard_later(kernel)
        while self._discards:
            await asyncio.gather(*list(self._discards), return_exceptions=True)

    def _discard_later(self, kernel: K) -> None:
        task = asyncio.ensure_future(self._discard_quietly(kernel))
        self._discards.add(task)
        task.add_done_callback(self._discards.discard)

    async def _discard_quietly(self, kernel: K) -> None:
        try:
            await self._discard(kernel)
        except Exception:
            log.warning("kernel pool: shutting down a kernel failed", exc_info=True)


def describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
