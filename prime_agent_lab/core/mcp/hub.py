"""The host's MCP hub: one session per configured server, shared by every agent of the process.

A session starts on its first use (never before), through the official `mcp` SDK, and lives in
a task of its own (session.py). Each request has a timeout (`mcp_call_timeout`): the SDK then
sends `notifications/cancelled` and the session stays usable; so it does when the awaiting task
is cancelled (Stop). A session whose connection ended is started again by the next request; a
request whose session ended under it fails, unless the request provably never reached the
server (the HTTP server refused the connection, or no longer knew the session), in which case
it is sent once more on a new session. Results over `mcp_output_cap` are refused with their
size, never cut.

Errors are `McpError`s naming the server and tool. Server secrets (`env`, `headers`) go to the
server only (a stdio server's process environment, the HTTP request headers): never a kernel's
environment, and they are added to what the product redacts from outputs and logs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from ..redaction import redact_withheld
from ..settings import Settings
from .config import McpServerConfig
from .errors import McpError, where
from .results import call_result, resource_contents, serialised_size, tool_listing
from .session import DEAD, IDLE, READY, McpSession, SessionFailed

T = TypeVar("T")
MIN_START_TIMEOUT = 30.0  # seconds a server may take to start, at least (a short call bound
# must not fail a server that is slow to start: `npx`, a loaded machine)
ENDING_BOUND = 5.0  # seconds to wait for a failed session's task to say why it ended


class McpHub:
    def __init__(
        self,
        call_timeout: float,
        output_cap: int,
        *,
        timeout_setting: str = "",
        cap_setting: str = "",
    ) -> None:
        """`timeout_setting` and `cap_setting` name the settings in messages as the host
        spells them (`--mcp-call-timeout`, `c.PrimeAgentLab.mcp_output_cap`)."""
        self._call_timeout = call_timeout
        self._output_cap = output_cap
        self._timeout_setting = f" ({timeout_setting})" if timeout_setting else ""
        self._cap_setting = f" ({cap_setting})" if cap_setting else ""
        self._sessions: dict[McpServerConfig, McpSession] = {}
        self._closed = False

    @classmethod
    def from_settings(cls, settings: Settings) -> McpHub:
        return cls(
            settings.mcp_call_timeout,
            settings.mcp_output_cap,
            timeout_setting=settings.spell("mcp_call_timeout"),
            cap_setting=settings.spell("mcp_output_cap"),
        )

    # ------------------------------------------------------------ what callers ask

    async def list_tools(self, config: McpServerConfig) -> list[dict[str, Any]]:
        """`[{"name", "description", "input_schema"}]` of the server (starting it if needed)."""
        session = self._session(config)
        listing = await self._request(session, config.name, None, _all_tools)
        session.tools = {tool["name"]: tool for tool in tool_listing(listing)}
        return list(session.tools.values())

    async def call_tool(
        self, config: McpServerConfig, tool: str, arguments: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The tool's result as `results.call_result` shapes it. An isError result is returned
        (`is_error`), not raised: the caller says it in its own words."""
        label = where(config.name, tool)
        if arguments is not None and not isinstance(arguments, dict):
            raise McpError(f"{label}: the arguments must be a dict", config.name, tool)
        session = self._session(config)
        if session.tools is None or tool not in session.tools:
            await self.list_tools(config)  # a tool added since the last listing is found
            assert session.tools is not None
            if tool not in session.tools:
                known = ", ".join(session.tools) or "none"
                raise McpError(
                    f"{label}: no tool named {tool!r} (its tools: {known})",
                    config.name,
                    tool,
                )
        result = await self._request(
            session, label, tool, lambda client: client.call_tool(tool, arguments or {})
        )
        wire = call_result(result)
        self._check_size(wire["chars"], label, config.name, tool)
        return wire

    async def read_resource(self, config: McpServerConfig, uri: str) -> list[dict[str, Any]]:
        """The resource's contents as blocks (`{"type": "resource", "uri", "text" | "blob",
        "mime_type"}`)."""
        label = f"{config.name} {uri}"
        session = self._session(config)
        result = await self._request(session, label, None, lambda client: client.read_resource(uri))
        blocks = resource_contents(result)
        self._check_size(serialised_size(blocks), label, config.name, None)
        return blocks

    async def state(self, config: McpServerConfig) -> dict[str, str]:
        """`{"state": idle | starting | ready | dead | error, "error": why}`; starts nothing."""
        session = self._sessions.get(config)
        if session is None:
            return {"state": IDLE, "error": ""}
        state = DEAD if session.state == READY and not session.alive else session.state
        return {"state": state, "error": session.error}

    async def aclose(self) -> None:
        """Close every session (a stdio server that does not exit is killed); idempotent."""
        self._closed = True
        sessions = list(self._sessions.values())
        await asyncio.gather(*(session.aclose() for session in sessions), return_exceptions=True)

    # ------------------------------------------------------------ how

    def _session(self, config: McpServerConfig) -> McpSession:
        if self._closed:
            raise McpError(f"{config.name}: the MCP sessions are closed", config.name)
        session = self._sessions.get(config)
        if session is None:
            redact_withheld(config.secrets())
            session = McpSession(
                config,
                start_timeout=max(self._call_timeout, MIN_START_TIMEOUT),
                call_timeout=self._call_timeout,
            )
            self._sessions[config] = session
        return session

    async def _request(
        self,
        session: McpSession,
        label: str,
        tool: str | None,
        send: Callable[[ClientSession], Awaitable[T]],
    ) -> T:
        """`send` over the session, started (again) if needed, with the errors said for people;
        sent a second time only when the first provably never reached the server."""
        server = session.config.name
        for attempt in (1, 2):
            try:
                client = await session.client()
            except SessionFailed as failed:
                raise McpError(f"{server}: could not start: {failed}", server, tool) from None
            session.mark_stderr()  # a failure quotes what the server said from here on
            try:
                # past it the awaiting is cancelled, and the SDK sends notifications/cancelled
                async with asyncio.timeout(self._call_timeout):
                    return await send(client)
            except TimeoutError:
                raise self._timed_out(label, server, tool) from None
            except MCPError as exc:
                if _session_unknown(exc) or exc.code == types.CONNECTION_CLOSED:
                    session.mark_dead()
                    await session.wait_ended(ENDING_BOUND)
                    if attempt == 1 and (_session_unknown(exc) or session.unreachable):
                        continue  # never reached the server: once more, on a new session
                    why = session.error or (
                        "it was closed" if session.closing else "the connection closed"
                    )
                    raise McpError(
                        f"{label}: the session ended during the call: {why}", server, tool
                    ) from None
                raise McpError(f"{label}: {session.shown(exc.message)}", server, tool) from None
            except (RuntimeError, ValueError) as exc:  # an answer the SDK would not accept
                why = session.shown(f"{type(exc).__name__}: {exc}")
                raise McpError(f"{label}: {why}", server, tool) from None
        raise AssertionError("unreachable")

    def _timed_out(self, label: str, server: str, tool: str | None) -> McpError:
        return McpError(
            f"{label}: timed out after {self._call_timeout:g} s{self._timeout_setting}",
            server,
            tool,
        )

    def _check_size(self, chars: int, label: str, server: str, tool: str | None) -> None:
        if chars > self._output_cap:
            raise McpError(
                f"{label}: the result is {chars:,} characters, over the cap of "
                f"{self._output_cap:,}{self._cap_setting}; nothing of it was kept: ask for less",
                server,
                tool,
            )


async def _all_tools(client: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await client.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


def _session_unknown(exc: MCPError) -> bool:
    """The HTTP server answered 404 for the session (it restarted, or dropped the session), so it
    never saw the request. Servers word it differently: the Python SDK "Session not found"
    (INVALID_REQUEST), the TypeScript SDK the same with -32001, the client's own stand-in
    "Session terminated"."""
    message = exc.message.lower()
    return (
        exc.code in (types.INVALID_REQUEST, types.REQUEST_TIMEOUT)
        and "session" in message
        and any(word in message for word in ("not found", "terminated", "expired", "unknown"))
    )
