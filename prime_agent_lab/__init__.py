"""Prime Agent Lab: a Recursive Language Model agent whose REPL is your JupyterLab notebook."""

from __future__ import annotations

from typing import Any

from .version import __version__

__all__ = ["__version__"]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "@prime-agent-lab/labextension"}]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .jupyter.app import PrimeAgentLab

    return [{"module": "prime_agent_lab", "app": PrimeAgentLab}]
