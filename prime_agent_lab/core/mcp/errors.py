"""The one error the MCP side raises: it names the server, and the tool when there is one."""

from __future__ import annotations


class McpError(Exception):
    """An MCP server could not be reached, started or asked; the message says which server (and
    tool) and why, as `papers.search: timed out after 60 s`."""

    def __init__(self, message: str, server: str, tool: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.server = server
        self.tool = tool


def where(server: str, tool: str | None = None) -> str:
    """`papers` or `papers.search`: how a message names what failed."""
    return f"{server}.{tool}" if tool else server
