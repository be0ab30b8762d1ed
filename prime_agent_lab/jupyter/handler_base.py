"""What every REST handler of the extension shares: JSON bodies read in bounded chunks, JSON
errors, typed body fields, and the host's errors as HTTP statuses."""

from __future__ import annotations

import json
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from ..core.commands import CommandError
from ..core.family import FamilyError
from ..core.jsonfile import BadJson, parse_json
from ..core.sessions import SessionError, SessionWriteError, check_session_id
from ..core.text import json_type, shorten
from .host import AgentHost, HostError, http_error_text

AUTH_RESOURCE = "prime_agent"
BODY_SLACK_BYTES = 64 * 1024


class JsonErrors:
    """Errors as `{"message": str}`, the message as written (see `http_error_text`)."""

    _reason: str

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, web.HTTPError):
            message = http_error_text(exc)
        else:
            message = getattr(exc, "message", None) or self._reason
        self.set_header("Content-Type", "application/json")  # type: ignore[attr-defined]
        self.finish(json.dumps({"message": message}))  # type: ignore[attr-defined]


@web.stream_request_body
class ApiBase(JsonErrors, ExtensionHandlerMixin, APIHandler):
    """JSON in, JSON out. Bodies are read in chunks and refused past a bound (413), since the
    largest legitimate one is a chat message of `max_message_chars`."""

    auth_resource = AUTH_RESOURCE

    @property
    def host(self) -> AgentHost:
        return self.settings["prime_agent_host"]

    def _max_body_bytes(self) -> int:
        # A character is at most 12 bytes of JSON (a surrogate pair as two \uXXXX escapes).
        return 12 * self.host.settings.max_message_chars + BODY_SLACK_BYTES

    async def prepare(self) -> None:  # type: ignore[override]
        self._chunks: list[bytes] = []
        self._size = 0
        limit = self._max_body_bytes()
        self.request.connection.set_max_body_size(limit)
        length = self.request.headers.get("Content-Length", "0")
        if not length.isdigit() or int(length) > limit:
            raise web.HTTPError(413, f"request body too large (limit {limit:,} bytes)")
        await ensure_async(super().prepare())

    def data_received(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self._max_body_bytes():
            raise web.HTTPError(413, "request body too large")
        self._chunks.append(chunk)

    def body(self) -> dict[str, Any]:
        """The body's JSON object; anything else (not UTF-8, not JSON, nested too deeply, a
        number out of range, ...) is a 400 that says why (core/jsonfile.py)."""
        try:
            data = parse_json(b"".join(self._chunks) or b"{}")
        except BadJson as exc:
            raise web.HTTPError(400, f"the request body {exc.reason}") from None
        if not isinstance(data, dict):
            raise web.HTTPError(400, f"request body must be a JSON object, not {json_type(data)}")
        return data

    def reply(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data))

    def session_id(self, raw: str) -> str:
        try:
            return check_session_id(raw)
        except SessionError as exc:
            raise web.HTTPError(400, str(exc)) from None


def only_fields(data: dict[str, Any], *fields: str) -> dict[str, Any]:
    """`data` when it has no field but `fields`; else a 400 naming the first unknown one (a
    misspelt field is never ignored)."""
    unknown = [k for k in data if k not in fields]
    if unknown:
        known = f"the fields are {', '.join(fields)}" if fields else "this request takes none"
        raise web.HTTPError(400, f"unknown field {shorten(unknown[0], 40)}; {known}")
    return data


def text_field(data: dict[str, Any], key: str) -> str | None:
    """An optional string field: absent or null is None; anything but a string is a 400."""
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise web.HTTPError(400, f"{key} must be a string, not {json_type(value)}")


def bool_field(data: dict[str, Any], key: str) -> bool:
    """An optional boolean field: only JSON true/false (the string "false" is not false)."""
    value = data.get(key, False)
    if value is None or isinstance(value, bool):
        return bool(value)
    shown = f"{json_type(value)} {shorten(value)}"
    raise web.HTTPError(400, f"{key} must be true or false (a JSON boolean), not {shown}")


def host_errors(method: Any) -> Any:
    async def wrapper(self: ApiBase, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        except (HostError, CommandError, FamilyError) as exc:
            raise web.HTTPError(exc.status, exc.message) from None
        except SessionWriteError as exc:  # a full disk: 507 Insufficient Storage, said plainly
            raise web.HTTPError(507, str(exc)) from None

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper
