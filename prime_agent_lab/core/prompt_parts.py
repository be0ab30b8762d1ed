"""The rows of `/context` (core/context_report.py) and the providers that add some: one part
of an agent's system prompt each, with where it came from and its size (docs/project-context.md).

Kept apart from the report so the runtime (which holds the providers) and a provider (the MCP
servers' part, core/mcp_ops.py) need not import the report, which reads the runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from .tokens import estimate_tokens


class McpServerView(TypedDict):
    """A server of a project `.mcp.json` as it would run: what Trust agrees to start."""

    name: str
    transport: str
    """`stdio` (`command`, `args`, `cwd`) or `http` (`url`)."""
    command: str
    args: list[str]
    cwd: str
    """The folder it runs in ("" when not said)."""
    url: str
    env: list[str]
    """Names only: values are never shown."""
    headers: list[str]
    """Names only: values are never shown."""


class ProjectFileInfo(TypedDict):
    """A project file's row in `/context`: what its Trust button sends (`path`, `sha256`) and
    what it trusts (`content`, or `servers` and `problems`)."""

    path: str
    kind: str
    """`context` (AGENTS.md and the like) or `mcp` (`.mcp.json`)."""
    sha256: str
    size: int
    """Bytes."""
    link_to: str
    """The file it is a link to (relative to the root), "" when it is not a link."""
    content: str
    """A context file: the whole text that enters the prompt (once trusted), the cut's note
    included when cut; "" for `.mcp.json`."""
    cut: bool
    """Whether `content` was cut to the cap."""
    servers: list[McpServerView]
    """A `.mcp.json`: its servers as they would run."""
    problems: list[str]
    """A `.mcp.json`: what of it cannot be read (skipped entries, bad JSON)."""


class PromptPart(TypedDict):
    """One part of the system prompt (or a project file that is not in it, and why)."""

    part: str
    """`base prompt`, `sub-agents`, `sub-agent doctrine`, `harness`, `project context`, or a
    provider's part (`mcp servers`)."""
    source: str
    """Where it comes from: a file, a store, a setting."""
    chars: int
    """Characters it adds to the system prompt (0 when it is not in it)."""
    tokens: int
    """`chars` as estimated tokens."""
    status: str
    """`used`, or for project files `cut`, `untrusted` or `unreadable`; a provider may say
    `trusted`/`untrusted` too."""
    note: str
    file: ProjectFileInfo | None


PartProvider = Callable[[Any, str], list[PromptPart]]
"""Called with the runtime and a session id; returns rows shown after the project files."""


def part(
    name: str, source: str, text: str, status: str = "used", note: str = "", **file: Any
) -> PromptPart:
    """A row of the report for `text` as it stands in the prompt."""
    return {
        "part": name,
        "source": source,
        "chars": len(text),
        "tokens": estimate_tokens(text) if text else 0,
        "status": status,
        "note": note,
        "file": ProjectFileInfo(**file) if file else None,  # type: ignore[typeddict-item]
    }
