"""One MCP server's session, from start to close, in a task of its own.

The SDK's transports and `ClientSession` are anyio context managers whose cancel scopes must be
entered and left by the same task; a session shared by many callers (each a bridge request's
task, any of which may be cancelled) therefore lives in one task of its own (`_lifetime`), and
callers only send requests over it. The lifetime task opens the transport, initializes the
session, then waits until it is closed or the connection ends (the stdio process exits, the HTTP
transport fails); either way it leaves every context in order.

Between the transport and the session a pump passes the messages on, so the end of the
connection is seen at once (the SDK does not say when its read loop ends): the session is then
`dead`, and the next use starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import IO, Any

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import (
    MCP_DEFAULT_SSE_READ_TIMEOUT,
    MCP_DEFAULT_TIMEOUT,
    create_mcp_http_client,
)
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from ..redaction import Redactor, redact_logs_of
from .config import STDIO, McpServerConfig, shown_url

# they log a server's whole URL (its query and userinfo too) at INFO and DEBUG
redact_logs_of("httpx2", "httpx", "mcp.client.streamable_http")

IDLE, STARTING, READY, DEAD, ERROR = "idle", "starting", "ready", "dead", "error"
STDERR_TAIL = 600  # characters of a stdio server's stderr quoted when it fails
HTTP_READ_SLACK = 30.0  # seconds an HTTP read may wait past the call bound (the hub cuts first)
CLOSE_BOUND = 8.0  # seconds a close waits for the lifetime task (the SDK kills within ~4 s)


class McpSession:
    """The session with one configured server. `client()` starts it when needed and answers
    the running `ClientSession`; the state says how it is (`IDLE` before the first use)."""

    def __init__(
        self, config: McpServerConfig, *, start_timeout: float, call_timeout: float
    ) -> None:
        self.config = config
        self.state = IDLE
        self.error = ""  # why it is `dead` or `error`, for `state()` and messages
        self.tools: dict[str, dict[str, Any]] | None = None  # the listing, per started session
        self._start_timeout = start_timeout
        self._call_timeout = call_timeout
        self._client: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: anyio.Event | None = None  # set to end the lifetime
        self._closing = False
        self._lost = False  # the connection ended by itself
        self._start_lock = asyncio.Lock()
        self._ready: asyncio.Future[None] | None = None
        self._stderr: IO[str] | None = None
        self._stderr_mark = 0  # offset in `_stderr` where what a failure may quote begins
        self.unreachable = False  # it ended because the server refused the connection

    @property
    def alive(self) -> bool:
        return self.state == READY and not self._lost

    @property
    def closing(self) -> bool:
        return self._closing

    async def client(self) -> ClientSession:
        """The running session, started first when it is not (idle, dead or failed to start);
        a start under way (its first caller gone) is waited for. Raises `SessionFailed` with
        why it could not start."""
        async with self._start_lock:
            if self.state != STARTING and not self.alive:
                await self._stop_lifetime()
                self._begin()
            await self._started()
            assert self._client is not None
            return self._client

    def mark_dead(self) -> None:
        """The connection failed under a request: end this session (its lifetime says why);
        the next use starts a new one."""
        self._lost = True
        if self._wake is not None:
            self._wake.set()

    async def wait_ended(self, bound: float) -> None:
        """Wait (at most `bound` seconds) for the lifetime task to finish."""
        if self._task is not None and not self._task.done():
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._task), bound)

    async def aclose(self) -> None:
        self._closing = True
        await self._stop_lifetime()
        self.state = IDLE if self.state in (READY, STARTING) else self.state
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def mark_stderr(self) -> None:
        """From now on: a failure quotes what a stdio server wrote to stderr after this (a
        request begins), not what it said long before."""
        if self._stderr is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            self._stderr_mark = self._stderr.seek(0, 2)

    def stderr_tail(self) -> str:
        """The end of a stdio server's stderr since its start or the last `mark_stderr` (what
        it said before it failed), its secrets redacted, or ""."""
        if self._stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            self._stderr.seek(0, 2)
            size = self._stderr.tell()
            self._stderr.seek(max(self._stderr_mark, size - STDERR_TAIL * 4))
            tail = self._stderr.read()[-STDERR_TAIL:].strip()
            return Redactor(self.config.secrets()).text(tail)
        return ""

    def shown(self, text: str) -> str:
        """`text` without the server's URL (but as `shown_url`) and secrets."""
        if self.config.url:
            text = text.replace(self.config.url, shown_url(self.config.url))
        return Redactor(self.config.secrets()).text(text)

    # ------------------------------------------------------------ the lifetime task

    def _begin(self) -> None:
        self.state, self.error, self.tools = STARTING, "", None
        self._lost = self._closing = self.unreachable = False
        self._client = None
        self._wake = anyio.Event()
        self._ready = asyncio.get_running_loop().create_future()
        # a start whose caller went away may fail unwatched: its failure is in `error`
        self._ready.add_done_callback(lambda done: done.cancelled() or done.exception())
        name = f"mcp session {self.config.name}"
        self._task = asyncio.create_task(self._lifetime(self._ready), name=name)

    async def _started(self) -> None:
        assert self._ready is not None
        try:
            await asyncio.shield(self._ready)  # a cancelled caller leaves the start going on
        except SessionFailed:
            raise SessionFailed(self.error) from None

    async def _lifetime(self, ready: asyncio.Future[None]) -> None:
        failure: BaseException | None = None
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                passed_on, session_read = anyio.create_memory_object_stream[Any](0)
                pump = await stack.enter_async_context(anyio.create_task_group())
                pump.start_soon(self._pump, read, passed_on)
                client = await stack.enter_async_context(ClientSession(session_read, write))
                try:
                    with anyio.fail_after(self._start_timeout):
                        await client.initialize()
                except TimeoutError:
                    bound = f"did not answer its start within {self._start_timeout:g} s"
                    raise SessionFailed(bound) from None
                self._client, self.state = client, READY
                ready.set_result(None)
                assert self._wake is not None
                await self._wake.wait()
                pump.cancel_scope.cancel()  # before the transport closes under it
        except BaseException as exc:
            failure = exc
        finally:
            self._client = None
            self.unreachable = failure is not None and any(
                isinstance(leaf, httpx2.ConnectError) for leaf in _leaves(failure)
            )
            reason = self.shown(describe_failure(failure, self.stderr_tail())) if failure else ""
            if not ready.done():
                self.state = ERROR
                if self._closing:
                    reason = "closed while it started"
                self.error = reason or "the connection closed while starting"
                ready.set_exception(SessionFailed(self.error))
            elif self._closing:
                self.state = IDLE
            else:
                self.state = DEAD
                if not self.error:
                    tail = self.stderr_tail()
                    self.error = reason or "the server closed the connection" + (
                        f" (its stderr: {tail})" if tail else ""
                    )

    async def _pump(
        self,
        read: MemoryObjectReceiveStream[Any],
        passed_on: MemoryObjectSendStream[Any],
    ) -> None:
        try:
            async for message in read:
                await passed_on.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            if not self._closing:
                self._lost = True  # before the session sees the end: callers check it
            if self._wake is not None:
                self._wake.set()
            passed_on.close()

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        config = self.config
        if config.transport == STDIO:
            if self._stderr is not None:
                self._stderr.close()
            # kept open past this block: a failure quotes its tail. Appending: the server
            # shares the file's offset, which reading the tail moves.
            self._stderr = tempfile.TemporaryFile("a+", encoding="utf-8", errors="replace")  # noqa: SIM115
            self._stderr_mark = 0
            parameters = StdioServerParameters(
                command=config.command, args=list(config.args), env=dict(config.env), cwd=config.cwd
            )
            async with stdio_client(parameters, errlog=self._stderr) as streams:
                yield streams
        else:
            # a tool's answer may take up to the call bound to start coming
            read = max(MCP_DEFAULT_SSE_READ_TIMEOUT, self._call_timeout + HTTP_READ_SLACK)
            timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=read)
            async with (
                create_mcp_http_client(headers=dict(config.headers), timeout=timeout) as http,
                streamable_http_client(config.url, http_client=http) as streams,
            ):
                yield streams

    async def _stop_lifetime(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        if self._wake is not None:
            self._wake.set()
        if self.state == STARTING:
            task.cancel()  # it waits for no wake-up while it starts
        if not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), CLOSE_BOUND)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


class SessionFailed(Exception):
    """The session could not start, or ended; the message says why, for people."""


def describe_failure(exc: BaseException, stderr_tail: str = "") -> str:
    """One line for why a session failed: the innermost errors of an exception group, the OS
    error of a command that is missing, the server's last words on stderr."""
    leaves = list(_leaves(exc))
    text = "; ".join(dict.fromkeys(_one_line(leaf) for leaf in leaves)) or type(exc).__name__
    if stderr_tail:
        text += f" (its stderr: {stderr_tail})"
    return text


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, SessionFailed):
        return str(exc)
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"no such command: {exc.filename}"
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        return "the server closed the connection"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
