"""`mcp`: the MCP servers the user configured, reached from the agent's cells (docs/mcp.md).

await mcp.list_servers()                  # [{"name": "papers", "transport": "stdio", ...}]
await mcp.list_tools("papers")            # [{"name": "search", "description", "input_schema"}]
hits = await mcp.call_tool("papers", "search", {"query": "RLM"})
doc = await mcp.read_resource("papers", "papers://2512.24601")

The host holds the servers' sessions and secrets; this kernel reaches them over the bridge and
turns the results into Python values: a tool's structured content (a dict), else its single
block (a text as `str`, parsed when it is JSON; an image as an `McpImage` that shows itself in
the cell; a resource as a dict), else a list of those.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from .bridge import BridgeError
from .operations import CALL_MCP_TOOL, LIST_MCP_SERVERS, LIST_MCP_TOOLS, READ_MCP_RESOURCE

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]

_REFUSED = re.compile(r"^host refused the call \(\d+\): |^McpError: ")


class McpError(RuntimeError):
    """An MCP call failed (unknown server or tool, the server could not start or died, a
    timeout, a result over the cap); the message names the server (and tool)."""


class McpToolError(McpError):
    """The tool ran and reported an error (`isError`): `papers.search: <its text>`."""


class McpImage:
    """An image a tool returned: shown in the cell; `.data` holds its bytes."""

    def __init__(self, data: bytes, mime_type: str) -> None:
        self.data = data
        self.mime_type = mime_type

    def _repr_png_(self) -> bytes | None:
        return self.data if self.mime_type == "image/png" else None

    def _repr_jpeg_(self) -> bytes | None:
        return self.data if self.mime_type in ("image/jpeg", "image/jpg") else None

    def __repr__(self) -> str:
        return f"McpImage({self.mime_type}, {len(self.data):,} bytes)"


class Mcp:
    """Bound as `mcp` in an agent's kernel."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def list_servers(self) -> list[dict[str, Any]]:
        """The servers this session may use: `{name, transport, command | url, source, state,
        error}` each (`state`: `idle`, `starting`, `ready`, `dead` or `error`; `error` says
        why; `command` is the program's name only, `url` has no userinfo or query); then, when
        a project `.mcp.json` is not trusted, `{"untrusted": [{"file", "servers"}]}` (a count,
        no names); then each skipped config entry as `{name, source, state: "error", error}`."""
        result: list[dict[str, Any]] = await self._ask(LIST_MCP_SERVERS, {}, "MCP", "MCP")
        return result

    async def list_tools(self, server: str) -> list[dict[str, Any]]:
        """The server's tools: `{name, description, input_schema}` each."""
        result: list[dict[str, Any]] = await self._ask(
            LIST_MCP_TOOLS, {"server": server}, str(server), str(server)
        )
        return result

    async def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any] | None = None
    ) -> Any:
        """Call `tool` on `server` with `arguments`; its result as a Python value. Raises
        McpToolError when the tool reports an error, McpError when the call fails."""
        answer = await self._ask(
            CALL_MCP_TOOL,
            {"server": server, "tool": tool, "arguments": arguments or {}},
            str(server),
            f"{server}.{tool}",
        )
        blocks = [block_value(b) for b in answer.get("content") or []]
        if answer.get("is_error"):
            text = "\n".join(b for b in blocks if isinstance(b, str)) or "the tool failed"
            raise McpToolError(f"{server}.{tool}: {text}")
        return tool_value(answer.get("structured"), blocks)

    async def read_resource(self, server: str, uri: str) -> Any:
        """The resource at `uri`: text as `str`, a blob as `bytes` (a list when it has several
        parts)."""
        answer = await self._ask(
            READ_MCP_RESOURCE, {"server": server, "uri": uri}, str(server), f"{server} {uri}"
        )
        parts = [resource_value(part) for part in answer.get("contents") or []]
        return parts[0] if len(parts) == 1 else parts

    async def _ask(self, op: str, payload: dict[str, Any], server: str, what: str) -> Any:
        """The host's answer; its refusal as an McpError that names the server (the host's
        messages do; one that does not is prefixed with `what`)."""
        try:
            return await self._call(op, payload)
        except BridgeError as exc:
            message = _REFUSED.sub("", str(exc))
            named = message.startswith(server) and message[len(server) : len(server) + 1] in ".: "
            raise McpError(message if named else f"{what}: {message}") from None

    def __repr__(self) -> str:
        return (
            "mcp: await mcp.list_servers(), await mcp.list_tools(server), await "
            "mcp.call_tool(server, tool, arguments=None), await mcp.read_resource(server, uri)"
        )


def tool_value(structured: Any, blocks: list[Any]) -> Any:
    if structured is not None:
        return structured
    if len(blocks) == 1:
        return parsed(blocks[0]) if isinstance(blocks[0], str) else blocks[0]
    return blocks


def parsed(text: str) -> Any:
    """`text` as JSON when it is a JSON object or array, else as it is."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def block_value(block: dict[str, Any]) -> Any:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "image":
        return McpImage(base64.b64decode(block.get("data", "")), _mime(block))
    return block  # a resource, a resource link, audio: as the server gave it


def resource_value(part: dict[str, Any]) -> Any:
    if "blob" in part:
        return base64.b64decode(part["blob"])
    return str(part.get("text", ""))


def _mime(block: dict[str, Any]) -> str:
    return str(block.get("mimeType") or block.get("mime_type") or "")
