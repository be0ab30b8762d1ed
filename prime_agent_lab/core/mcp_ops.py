"""Bridge operations behind the kernel's `mcp` (docs/mcp.md): the MCP servers the calling
agent's session may use, their tools and resources, through the host's one hub.

The hub (prime_agent_lab/core/mcp/hub.py) is made on the first call, so a host that never calls a
server starts none, and closed with the runtime (`McpAccess.close`, from `AgentRuntime.shutdown`,
which both the Jupyter server and the CLI run). Each tool call and resource read is an `mcp_call`
session entry and a chat line; never its arguments, never its result.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from prime_agent_kernel.operations import (
    CALL_MCP_TOOL,
    LIST_MCP_SERVERS,
    LIST_MCP_TOOLS,
    READ_MCP_RESOURCE,
)

from .bridge import BridgeError
from .caller import CallerContext, Register, TreeRuntime
from .entry_types import mcp_call_line
from .mcp_visible import Visible, visible_servers
from .prompt_parts import PromptPart, part
from .redaction import Redactor
from .sessions import SessionError, SessionLog
from .text import json_type, preview

log = logging.getLogger(__name__)
MAX_ERROR_CHARS = 300  # of an `mcp_call` entry's error text
TIMED_OUT = re.compile(r": timed out after [0-9.]+ s")  # the hub's words (mcp/hub.py `_timed_out`)

if TYPE_CHECKING:
    from .agent import Agent
    from .mcp.config import McpConfigProblem, McpServerConfig
    from .mcp.hub import McpHub
    from .project_context import ProjectContext


class McpAccess:
    """The host's MCP hub, made on first use and closed once, and the servers each session
    reaches (the configured ones, and its project's trusted `.mcp.json` files': `project`)."""

    def __init__(self, settings: Callable[[], Any], project: ProjectContext | None = None) -> None:
        self._settings = settings
        self._project = project
        self._hub: McpHub | None = None
        self._closed = False
        _, problems = self.configured()  # their secrets are redacted from now on
        for problem in problems:  # never a secret: config.py names an env or header key only
            log.warning("MCP server config skipped: %s", problem)

    def configured(self) -> tuple[list[McpServerConfig], list[McpConfigProblem]]:
        """The user's servers (the global file, the settings, `--mcp-config`) and the entries
        skipped. Reading them adds their secrets to the redacted values."""
        from .mcp.sources import load_configured_servers

        return load_configured_servers(self._settings())

    def visible(self, session: SessionLog | None) -> Visible:
        """The servers `session`'s agent reaches, for its calls and its prompt
        (core/mcp_visible.py)."""
        configured, problems = self.configured()
        if session is None:
            return Visible({server.name: server for server in configured}, {}, problems)
        return visible_servers(configured, problems, self._project, session.notebook_path)

    def prompt_section(self, session: SessionLog | None) -> str:
        """The system prompt's lines on the servers `session` may use ("" when there are
        none)."""
        from .mcp.prompt import mcp_prompt_section

        section = mcp_prompt_section(list(self.visible(session).servers.values()))
        return f"\n{section}\n" if section else ""

    @property
    def hub(self) -> McpHub:
        if self._closed:
            raise BridgeError(503, "the host is shutting down; MCP servers are closed")
        if self._hub is None:
            from .mcp.hub import McpHub

            self._hub = McpHub.from_settings(self._settings())
        return self._hub

    async def close(self) -> None:
        """Close every MCP session (stdio servers exit, HTTP sessions end)."""
        self._closed = True
        hub, self._hub = self._hub, None
        if hub is not None:
            await hub.aclose()


def secret_values(servers: Iterable[McpServerConfig]) -> list[str]:
    """The values of every server's `env` and `headers`: host-only, redacted everywhere."""
    return [value for server in servers for value in server.secrets()]


async def server_view(config: McpServerConfig, hub: McpHub) -> dict[str, Any]:
    """A server as `mcp.list_servers()` shows it: no env or header values."""
    return {**config.describe(), **await hub.state(config)}


def untrusted_view(untrusted: dict[str, int]) -> dict[str, Any]:
    """The untrusted project `.mcp.json` files as `mcp.list_servers()` shows them: how many
    servers each holds, never their names (text the file's author chose)."""
    files = [{"file": path, "servers": count} for path, count in untrusted.items()]
    return {"untrusted": files, "note": "not started until the user trusts them (/context)"}


def untrusted_text(untrusted: dict[str, int]) -> str:
    """`; 2 servers in clone/.mcp.json are not trusted (see /context)`, or ""."""
    return "".join(
        f"; {count} server{'s' if count > 1 else ''} in {path} "
        f"{'are' if count > 1 else 'is'} not trusted (see /context)"
        for path, count in untrusted.items()
    )


def problem_view(problem: McpConfigProblem) -> dict[str, Any]:
    """A skipped entry (or file) as `mcp.list_servers()` shows it: `error` says why."""
    return {
        "name": problem.name,
        "source": problem.source,
        "state": "error",
        "error": problem.reason,
    }


def register_mcp_operations(register: Register, access: McpAccess) -> None:
    """Offer `mcp.list_servers()`, `list_tools`, `call_tool` and `read_resource` through
    `register` (`AgentRuntime.operation`)."""

    async def list_servers(ctx: CallerContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
        visible = access.visible(ctx.session)
        views = [await server_view(config, access.hub) for config in visible.servers.values()]
        views += [untrusted_view(visible.untrusted)] if visible.untrusted else []
        return views + [problem_view(problem) for problem in visible.problems]

    async def list_tools(ctx: CallerContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
        config = _server(ctx, payload.get("server"))
        return await _failing_as_bridge_error(access.hub.list_tools(config))

    async def call_tool(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        config = _server(ctx, payload.get("server"))
        tool = _text(payload.get("tool"), "tool")
        arguments = payload.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise BridgeError(400, f"arguments must be a dict, not {json_type(arguments)}")
        call = access.hub.call_tool(config, tool, arguments)
        return await _recorded(ctx, config, {"tool": tool}, call)

    async def read_resource(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        config = _server(ctx, payload.get("server"))
        uri = _text(payload.get("uri"), "uri")
        call = _contents(access.hub.read_resource(config, uri))
        return await _recorded(ctx, config, {"uri": uri}, call)

    register(LIST_MCP_SERVERS, list_servers)
    register(LIST_MCP_TOOLS, list_tools)
    register(CALL_MCP_TOOL, call_tool)
    register(READ_MCP_RESOURCE, read_resource)


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise BridgeError(400, f"{what} must be a non-empty string, not {json_type(value)}")
    return value


def _server(ctx: CallerContext, name: object) -> McpServerConfig:
    name = _text(name, "server")
    visible: Visible = ctx.runtime.mcp.visible(ctx.session)
    config = visible.servers.get(name)
    if config is None:
        known = ", ".join(sorted(visible.servers)) or "none are configured (docs/mcp.md)"
        untrusted = untrusted_text(visible.untrusted)
        raise BridgeError(404, f"{name[:80]}: no such MCP server; servers: {known}{untrusted}")
    return config


async def _failing_as_bridge_error(call: Any) -> Any:
    from .mcp.errors import McpError

    try:
        return await call
    except McpError as exc:
        raise BridgeError(502, str(exc)) from None


async def _recorded(
    ctx: CallerContext, config: McpServerConfig, target: dict[str, str], call: Any
) -> dict[str, Any]:
    """Await `call` (a tool call or resource read), recording it as an `mcp_call` entry however
    it ends: done, failed, timed out, or cancelled (Stop cancels the bridge job, hence this)."""
    from .mcp.errors import McpError

    started = time.monotonic()
    status, error, chars = "error", "", 0
    try:
        result: dict[str, Any] = await call
        if result.get("is_error"):
            error = _tool_error_text(result)
        else:
            status = "ok"
        chars = int(result.get("chars") or len(json.dumps(result)))
        return result
    except asyncio.CancelledError:
        status, error = "cancelled", "the cell was interrupted"
        raise
    except McpError as exc:
        status = "timeout" if TIMED_OUT.search(exc.message) else "error"
        error = exc.message
        raise BridgeError(504 if status == "timeout" else 502, error) from None
    finally:
        _record(
            ctx.agent,
            config,
            {**target, "status": status, "seconds": round(time.monotonic() - started, 3)},
            chars,
            error,
        )


async def _contents(read: Awaitable[list[dict[str, Any]]]) -> dict[str, Any]:
    from .mcp.results import serialised_size

    blocks = await read
    return {"contents": blocks, "chars": serialised_size(blocks)}


def _tool_error_text(result: dict[str, Any]) -> str:
    texts = [b.get("text", "") for b in result.get("content") or [] if b.get("type") == "text"]
    return " ".join(t for t in texts if t) or "the tool reported an error"


def _record(
    agent: Agent, config: McpServerConfig, fields: dict[str, Any], chars: int, error: str
) -> None:
    entry: dict[str, Any] = {"server": config.name, **fields}
    if fields["status"] == "ok":
        entry["chars"] = chars
    elif error:
        redacted = Redactor(secret_values([config])).text(agent.redactor.text(error))
        entry["error"] = preview(redacted, MAX_ERROR_CHARS)
    if agent.running:
        entry["turn"] = agent.current_turn
    session: SessionLog = agent.session
    try:
        session.append("mcp_call", **entry)
    except SessionError:
        return  # a log that cannot be written says so elsewhere; the call's answer stands
    kind = "mcp_call" if entry["status"] == "ok" else "mcp_call_failed"
    turn = {"turn": entry["turn"]} if "turn" in entry else {}
    agent.events.emit("notice", kind=kind, text=mcp_call_line(entry), **turn)


def mcp_prompt_part(runtime: TreeRuntime, session_id: str) -> list[PromptPart]:
    """`/context`'s row for the prompt's MCP section (a `runtime.prompt_parts` provider): which
    servers it names and from where; no row when there are none."""
    session = runtime.session_of(session_id)
    visible = runtime.mcp.visible(session)
    rows = [problem_part(problem) for problem in visible.problems]
    servers = visible.servers.values()
    if not servers:
        return rows
    source = "; ".join(f"{server.name}: {server.source}" for server in servers)
    return [part("mcp servers", source, runtime.mcp.prompt_section(session)), *rows]


def problem_part(problem: McpConfigProblem) -> PromptPart:
    """`/context`'s row for a config file that could not be read (`unreadable`) or an entry
    that was skipped (`problem`): in the prompt with nothing, the reason in its note."""
    if problem.name is None:
        return part("mcp config", problem.source, "", "unreadable", problem.reason)
    return part("mcp config", problem.source, "", "problem", f"{problem.name}: {problem.reason}")
