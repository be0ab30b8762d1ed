"""The rows of `/context` (core/context_report.py) and the providers that add some: one part
of an agent's system prompt each, with where it came from and its size (docs/project-context.md).

Kept apart from the report so the runtime (which holds the providers) and a provider (the MCP
servers' part, core/mcp_ops.py) need not import the report, which reads the runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from .tokens import estimate_tokens


class ProjectFileInfo(TypedDict):
    """A project file's row in `/context`: what its Trust button sends (`path`, `sha256`)."""

    path: str
    kind: str
    """`context` (AGENTS.md and the like) or `mcp` (`.mcp.json`)."""
    sha256: str
    size: int
    """Bytes."""
    first_lines: str


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
