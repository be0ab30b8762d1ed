"""A gateway that refuses the host's credentials (HTTP 401: a wrong auth token, user info in the
gateway URL), told as what it is: jupyter_server passes the gateway's status through, and a 401
from a Jupyter server's own API means "log in again" to its browser client (review D8).

A 403 is not one: Kernel Gateway and Enterprise Gateway answer a wrong token with 401, and 403
when they refuse the request itself (`max_kernels` "Resource Limit", a per-user limit); that is
told with the gateway's own words by the caller."""

from __future__ import annotations

from urllib.parse import urlsplit

from jupyter_server.gateway.gateway_client import GatewayClient
from tornado.httpclient import HTTPClientError
from tornado.web import HTTPError

from ..core.gateway_url import printable_url

REFUSED = {401: "Unauthorized"}


def refusal_text(exc: BaseException, token_setting: str) -> str | None:
    """The gateway refused this host's credentials (HTTP 401 anywhere in `exc`'s causes):
    a sentence naming the gateway and what to fix (`token_setting`: how this host spells the
    gateway's token), never the token. None for any other error, or without a gateway."""
    gateway = GatewayClient.instance()
    status = _refused_status(exc)
    if status is None or not gateway.gateway_enabled:
        return None
    url = gateway.url or ""
    refused = f"the gateway {printable_url(url)} refused the credentials it was sent"
    why = f"HTTP {status} {REFUSED[status]}"
    if urlsplit(url).username is not None:
        return (
            f"{refused} ({why}): its URL carries user info (user:password@), which is sent "
            f"instead of the gateway's token; give the URL without it and the token in "
            f"{token_setting}"
        )
    return f"{refused} ({why}): set {token_setting} to the gateway's own auth token"


def _refused_status(exc: BaseException | None) -> int | None:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, HTTPError):
            status: object = exc.status_code
        elif isinstance(exc, HTTPClientError):
            status = exc.code
        else:
            status = getattr(exc, "status_code", None)  # websocket's bad handshake status
        if status in REFUSED:
            return int(status)  # type: ignore[call-overload]
        exc = exc.__cause__ or exc.__context__
    return None
