"""What the host answers a bad request with (`HostError`: an HTTP status and a message), and the
checks every route makes (a notebook path, an attached session)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from tornado import web

from ..core.agent import Agent
from ..core.settings import Settings
from ..core.text import shorten


class HostError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def refuse_long_text(text: str, settings: Settings, what: str) -> None:
    """A 413 for text over `max_message_chars`: a chat message, `/refine` instructions."""
    limit = settings.max_message_chars
    if len(text) > limit:
        raise HostError(
            413,
            f"the {what} has {len(text):,} characters; the limit is {limit:,} "
            f"({settings.spell('max_message_chars')}). Put long input in a file or a "
            "variable and ask the agent to read it.",
        )


def normalize_notebook_path(path: str) -> str:
    """A clean API path relative to the server root; path tricks are refused."""
    if not isinstance(path, str) or not path.strip():
        raise HostError(400, "notebook_path is required")
    cleaned = path.strip().replace("\\", "/")
    if cleaned.startswith("/") or "\x00" in cleaned:
        raise HostError(400, f"notebook_path must be relative to the server root: {shorten(path)}")
    parts = [p for p in cleaned.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise HostError(400, f"notebook_path may not leave the server root: {shorten(path)}")
    normalized = posixpath.join(*parts) if parts else ""
    if not normalized.endswith(".ipynb"):
        raise HostError(400, f"not a notebook (.ipynb): {shorten(path)}")
    return normalized


def http_error_text(exc: web.HTTPError) -> str:
    """An HTTPError's message as written: tornado doubles `%` in a message given without
    arguments (it formats `log_message % args` later), so format it back."""
    if not exc.log_message:
        return exc.reason or f"HTTP {exc.status_code}"
    try:
        return exc.log_message % exc.args
    except (TypeError, ValueError):
        return exc.log_message


def attached(agents: Mapping[str, Agent], session_id: str) -> Agent:
    """The attached agent of `session_id`; a 404 that says to attach it first."""
    agent = agents.get(session_id)
    if agent is None:
        raise HostError(404, f"no attached session {shorten(session_id)}; attach it first")
    return agent
