"""A gateway's address as the user gives it (`--gateway-url`, `JUPYTER_GATEWAY_URL`): checked
before anything starts, and shown without what may be a credential."""

from __future__ import annotations

import urllib.parse

SCHEMES = ("http", "https")


def _address_problem(url: str) -> str | None:
    """Why `url` is not an http(s) address with a host, or None when it is."""
    if any(c.isspace() or not c.isprintable() for c in url):
        # urlsplit drops leading blanks, jupyter_server does not ("scheme  ws is invalid")
        return "holds a space or a control character (pasted with the text around it?)"
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


def url_problem(url: str, token_setting: str) -> str | None:
    """Why `url` cannot be a gateway's address, or None when it can. A credential in it is
    refused: jupyter_server puts the API path after the URL, so a query (`?token=`) reaches
    the gateway's access log; `token_setting` is where the user puts the token instead."""
    if (problem := _address_problem(url)) is not None:
        return problem
    parts = urllib.parse.urlsplit(url)
    if "@" in parts.netloc:
        where = "user info (user:token@)"
    elif parts.query or parts.fragment or url.endswith(("?", "#")):
        where = "a query or fragment (?token=...)"
    else:
        return None
    return (
        f"carries {where}: give the gateway's token with {token_setting} instead "
        "(in the URL it would be written to the gateway's access log)"
    )


def printable_url(url: str) -> str:
    """The gateway's address without what may be a credential (user info, query, fragment)."""
    if _address_problem(url) is not None:
        return "(a malformed gateway URL)"
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
