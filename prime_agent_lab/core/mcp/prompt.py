"""The system prompt's section about the MCP servers: their names, where each came from, and how
to see their tools; never a tool schema (the agent lists them from a cell when it needs them)."""

from __future__ import annotations

from collections.abc import Sequence

from .config import McpServerConfig


def mcp_prompt_section(configs: Sequence[McpServerConfig]) -> str:
    """The section for `configs` (the servers this agent may use), or "" when there are none."""
    if not configs:
        return ""
    lines = [f"- `{c.name}` ({c.transport}, from {c.source})" for c in configs]
    return "\n".join(
        [
            "# MCP servers",
            "",
            "These MCP servers are reachable from your cells through `mcp`; results come back "
            "as Python values to keep in variables:",
            *lines,
            "",
            "Call `await mcp.list_tools(name)` to see a server's tools, then "
            "`await mcp.call_tool(name, tool, {...})`; `await mcp.read_resource(name, uri)` "
            "reads a resource.",
        ]
    )
