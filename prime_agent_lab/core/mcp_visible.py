"""Which MCP servers an agent's session reaches (docs/mcp.md, docs/project-context.md).

The user's configured servers (the global file, `mcp_servers`, `--mcp-config`), then the servers
of the project's `.mcp.json` files this user trusted, from the root down to the notebook's
folder: a later one replaces a server of the same name. The servers of a `.mcp.json` that is not
trusted (as it is now) are only counted, per file: never started, never named to the kernel or
the prompt (a name is text the file's author chose), and a call to one is a call to an unknown
server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .mcp.config import McpConfigProblem, McpServerConfig
    from .project_context import ProjectContext
    from .project_files import FoundFile


@dataclass(frozen=True)
class Visible:
    servers: dict[str, McpServerConfig]  # the ones it may use, by name
    untrusted: dict[str, int] = field(default_factory=dict)  # untrusted file -> its servers
    problems: list[McpConfigProblem] = field(default_factory=list)  # entries skipped


def visible_servers(
    configured: list[McpServerConfig],
    problems: list[McpConfigProblem],
    project: ProjectContext | None,
    notebook_path: str,
) -> Visible:
    """The servers an agent whose notebook is `notebook_path` reaches: `configured` (the user's,
    all trusted), then the trusted project `.mcp.json` files' (see the module's doc)."""
    from .mcp.config import merge_servers

    layers, skipped = [configured], list(problems)
    untrusted: dict[str, list[str]] = {}
    if project is not None and project.root is not None:
        for found in project.trusted_files(notebook_path, "mcp"):
            servers, found_problems = _parse(found.path, found.text, _folder_of(found))
            layers.append(servers)
            skipped += found_problems
        for item in project.untrusted(notebook_path):
            if item.kind == "mcp":
                untrusted[item.path] = _names(item.path, project)
    servers = {server.name: server for server in merge_servers(*layers)}
    counts = {path: sum(name not in servers for name in names) for path, names in untrusted.items()}
    return Visible(servers, {path: n for path, n in counts.items() if n}, skipped)


def _folder_of(found: FoundFile) -> Path | None:
    """Where a project `.mcp.json`'s servers run: the folder of the file the user trusted (its
    real place), not of a link to it (`clone/.mcp.json -> ../own/.mcp.json` must not run
    `clone/server.py`)."""
    return found.real.parent if found.real is not None else None


def _parse(
    path: str, text: str, base_dir: Path | None
) -> tuple[list[McpServerConfig], list[McpConfigProblem]]:
    from .mcp.config import McpConfigProblem, parse_mcp_config

    try:
        data = json.loads(text)
    except ValueError as exc:
        return [], [McpConfigProblem(path, None, f"not valid JSON: {exc}")]
    return parse_mcp_config(data, path, base_dir=base_dir)


def parse_project_file(
    path: str, text: str, real: Path | None
) -> tuple[list[McpServerConfig], list[McpConfigProblem]]:
    """The servers of a project `.mcp.json` (`path` relative to the root, `real` where it
    really is) as they would run, and what was skipped: what `/context` shows before Trust."""
    return _parse(path, text, real.parent if real is not None else None)


def _names(path: str, project: ProjectContext) -> list[str]:
    """The server names an untrusted `.mcp.json` holds (read, never started)."""
    from .project_files import read

    assert project.root is not None
    found = read(project.root, path, "mcp")
    servers, _ = _parse(path, found.text, _folder_of(found)) if found.data is not None else ([], [])
    return [server.name for server in servers]
