"""Where the user's MCP servers are configured, read in order of precedence (docs/mcp.md):

1. the user's global file, `<jupyter config dir>/prime_agent_lab/mcp.json`
   (`$PRIME_AGENT_LAB_MCP_CONFIG` names another);
2. `c.PrimeAgentLab.mcp_servers`;
3. `prime-agent-lab run --mcp-config FILE`, each file in the order given.

A later place replaces a server of the same name. A project's `.mcp.json` files are found and
trusted elsewhere (docs/project-context.md); they go through `config.parse_mcp_config` too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from jupyter_core.paths import jupyter_config_dir

from ..redaction import redact_withheld
from ..settings import CLI, SERVER, Settings, spell
from .config import (
    McpConfigProblem,
    McpServerConfig,
    merge_servers,
    parse_mcp_config,
    read_mcp_config_file,
)

ENV_GLOBAL_FILE = "PRIME_AGENT_LAB_MCP_CONFIG"


def global_config_path() -> Path:
    """The user's global MCP file: `$PRIME_AGENT_LAB_MCP_CONFIG`, else the Jupyter config
    directory's `prime_agent_lab/mcp.json`."""
    explicit = os.environ.get(ENV_GLOBAL_FILE)
    if explicit:
        return Path(explicit).expanduser()
    return Path(jupyter_config_dir()) / "prime_agent_lab" / "mcp.json"


def shown_path(path: Path) -> str:
    """`path` with the home folder as `~`, as a source is shown to people."""
    home = Path.home()
    try:
        return "~/" + str(path.relative_to(home))
    except ValueError:
        return str(path)


def load_configured_servers(
    settings: Settings, cli_files: Sequence[str] | None = None
) -> tuple[list[McpServerConfig], list[McpConfigProblem]]:
    """The user's servers from every trusted place, merged by precedence, and what was skipped
    (bad entries, a `--mcp-config` file that cannot be read). `cli_files` defaults to the
    settings' `mcp_config_files`. An absent global file is no problem. The servers' secrets
    are added to what the product redacts."""
    layers: list[list[McpServerConfig]] = []
    problems: list[McpConfigProblem] = []

    path = global_config_path()
    configs, found = read_mcp_config_file(path, shown_path(path), missing_ok=True)
    layers.append(configs)
    problems += found

    if settings.mcp_servers:
        configs, found = parse_mcp_config(settings.mcp_servers, spell("mcp_servers", SERVER))
        layers.append(configs)
        problems += found

    flag = spell("mcp_config_files", CLI)
    for name in settings.mcp_config_files if cli_files is None else cli_files:
        configs, found = read_mcp_config_file(Path(name).expanduser(), f"{flag} {name}")
        layers.append(configs)
        problems += found

    # a cell that reads a config file must not print its secrets into the notebook either
    redact_withheld(secret for layer in layers for config in layer for secret in config.secrets())
    return merge_servers(*layers), problems


def unreadable_cli_files(files: Sequence[str]) -> list[McpConfigProblem]:
    """The `--mcp-config` files that are absent, unreadable (a folder) or not a JSON object of
    servers: the CLI refuses to start with them (a bad entry in a good file is only skipped)."""
    flag = spell("mcp_config_files", CLI)
    problems: list[McpConfigProblem] = []
    for name in files:
        _, found = read_mcp_config_file(Path(name).expanduser(), f"{flag} {name}")
        problems += [problem for problem in found if problem.name is None]
    return problems
