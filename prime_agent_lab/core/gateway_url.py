"""A gateway's address as the user gives it (`--gateway-url`, `JUPYTER_GATEWAY_URL`): checked
before anything starts, and shown without what may be a credential."""

from __future__ import annotations

import urllib.parse

SCHEMES = ("http", "https")


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a gateway's address, or None when it can."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 -- raises on a port that is not a number in range
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if parts.scheme not in SCHEMES:
        return f"must start with http:// or https://, not {parts.scheme or 'nothing'}"
    if not parts.hostname:
        return "names no host"
    return None


def printable_url(url: str) -> str:
    """The gateway's address without what may be a credential (user info, query, fragment)."""
    if url_problem(url) is not None:
        return "(a malformed gateway URL)"
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
