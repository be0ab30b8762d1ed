"""The host's shutdown runs while the server still listens.

jupyter_server's `ServerApp.stop` (SIGTERM, a confirmed Ctrl-C, `shutdown_no_activity_timeout`)
closes the listening socket at once, then schedules `_cleanup`, which runs the extensions'
`stop_extension` and shuts the kernels down. A kernel on a gateway sends its shutdown snapshot to
this server over the bridge, on a new HTTP connection: refused by then, so what it held since its
last snapshot was lost (review 2, F2). `stop` here runs the host's shutdown first (its snapshots
are bounded by `shutdown_timeout`), then jupyter_server's own stop. `/api/shutdown` (File > Shut
Down) calls `_cleanup` before it stops listening: that order is right already.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


class StopAfter:
    """Replaces `serverapp.stop`: `first()` is awaited on the event loop before jupyter_server's
    stop. A second stop while `first` runs (a second Ctrl-C or SIGTERM) goes straight to
    jupyter_server's, as it would without this."""

    def __init__(self, serverapp: Any, first: Callable[[], Awaitable[object]]) -> None:
        self._serverapp = serverapp
        self._first = first
        self._jupyter_stop: Callable[..., None] = serverapp.stop
        self._began = False
        self._forwarded = False

    def install(self) -> None:
        self._serverapp.stop = self.stop

    def stop(self, from_signal: bool = False) -> None:
        """Called as `ServerApp.stop` is: from a signal handler too (then only the loop's
        thread-safe call is used)."""
        loop = self._running_loop()
        if self._began or loop is None:
            self._forward(from_signal)
            return
        self._began = True
        self._serverapp._stopping = True  # what jupyter_server's stop sets first
        try:
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._first_then_stop()))
        except RuntimeError:  # the loop closed meanwhile
            self._forward(from_signal)

    async def _first_then_stop(self) -> None:
        try:
            await self._first()
        except Exception:
            log.exception("Prime Agent Lab: the shutdown before the server stops failed")
        finally:
            if not self._forwarded:
                self._forward(from_signal=False)

    def _forward(self, from_signal: bool) -> None:
        self._forwarded = True
        self._jupyter_stop(from_signal=from_signal)

    def _running_loop(self) -> asyncio.AbstractEventLoop | None:
        loop = getattr(getattr(self._serverapp, "io_loop", None), "asyncio_loop", None)
        return loop if isinstance(loop, asyncio.AbstractEventLoop) and loop.is_running() else None
