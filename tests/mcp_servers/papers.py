"""A small literature-search MCP server for the tests, written with the official `mcp` SDK
(docs/mcp.md). The same tools over both transports:

    python tests/mcp_servers/papers_stdio.py [--linger]     # stdio
    python tests/mcp_servers/papers_http.py --port N        # streamable HTTP on 127.0.0.1:N/mcp

Tools:
- `search(query)`: structured results `{"query", "results": [{"id", "title"}]}`
- `slow(seconds, note="")`: sleeps; with `note` (a file path) it appends `started`, then
  `finished` or `cancelled` (when the client cancels the request), one per line
- `fail()`: an isError result ("the papers index is offline")
- `crash()`: exits the server process at once (exit code 3), answering nothing
- `image()`: a 1x1 PNG
- `big(chars)`: a text of `chars` characters (for the output cap)
- `secret_used()`: `{"set": bool}`: whether `PAPERS_TOKEN` is in its environment, never its value
- `header_used()`: `{"set": bool}`: whether the request carried an `X-Papers-Token` header (HTTP)
- `pid()`: the server's process id
Resource: `papers://{id}`: the paper's text.
"""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

PAPERS = {
    "2512.24601": "Recursive Language Models",
    "2310.06825": "Mistral 7B",
}
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer("papers", log_level="WARNING")


def _note(path: str, line: str) -> None:
    if path:
        with Path(path).open("a", encoding="utf-8") as file:
            file.write(line + "\n")


@server.tool()
def search(query: str) -> dict[str, object]:
    """Search the papers; results are structured."""
    words = query.lower().split()
    hits = [
        {"id": pid, "title": title}
        for pid, title in PAPERS.items()
        if any(w in title.lower() or w in pid for w in words)
    ]
    return {"query": query, "results": hits}


@server.tool()
async def slow(seconds: float, note: str = "") -> str:
    """Sleep `seconds`; `note` is a file to log started/finished/cancelled in."""
    _note(note, "started")
    try:
        await asyncio.sleep(seconds)
    except BaseException:  # the client's notifications/cancelled, or shutdown
        _note(note, "cancelled")
        raise
    _note(note, "finished")
    return f"slept {seconds} s"


@server.tool()
def fail() -> str:
    """Always fails with an isError result."""
    raise ToolError("the papers index is offline")


@server.tool()
def crash() -> str:
    """Exit the server process at once."""
    os._exit(3)


@server.tool()
def image() -> Image:
    """A 1x1 PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def big(chars: int) -> str:
    """A text of `chars` characters."""
    return "x" * chars


@server.tool()
def secret_used() -> dict[str, bool]:
    """Whether PAPERS_TOKEN is set in this server's environment (never its value)."""
    return {"set": bool(os.environ.get("PAPERS_TOKEN"))}


@server.tool()
def header_used(ctx: Context) -> dict[str, bool]:
    """Whether this request carried an X-Papers-Token header (never its value)."""
    return {"set": bool((ctx.headers or {}).get("x-papers-token"))}


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.resource("papers://{paper_id}", mime_type="text/plain")
def paper(paper_id: str) -> str:
    """A paper's text."""
    return f"{PAPERS.get(paper_id, 'Unknown paper')} ({paper_id}): full text."
