"""The Agents View's routes (docs/agents-view.md): the overview, its websocket, and messaging,
stopping and deleting an agent. Errors carry `error` (the Agents View contract) and `message`
(as every other route of the extension)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized, ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web, websocket

from ..core.agents_overview import parse_state
from ..core.wire import AgentsOverview
from .handler_base import AUTH_RESOURCE, ApiBase, bool_field, host_errors, only_fields
from .host_agents import AgentsDesk, desk_of

_SESSION = r"(?P<session_id>[A-Za-z0-9][A-Za-z0-9_-]*)"


class AgentsBase(ApiBase):
    @property
    def desk(self) -> AgentsDesk:
        return desk_of(self.settings)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = getattr(exc, "log_message", None) or getattr(exc, "message", None)
        text = message or self._reason
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": text, "message": text}))


class AgentsHandler(AgentsBase):
    """`GET /prime-agent/api/agents[?state=]`: every agent the server knows (AgentsOverview)."""

    @web.authenticated
    @authorized
    @host_errors
    async def get(self) -> None:
        try:
            state = parse_state(self.get_query_argument("state", None))
        except ValueError as exc:
            raise web.HTTPError(400, str(exc)) from None
        self.reply(await self.desk.overview(state))


class AgentMessageHandler(AgentsBase):
    """`POST .../agents/<id>/message {"text"}`: 202 `{delivered: "chat" | "mail"}`."""

    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str) -> None:
        data = only_fields(self.body(), "text")
        sent = await self.desk.message(self.session_id(session_id), data.get("text"))
        self.reply(sent, 202)


class AgentStopHandler(AgentsBase):
    """`POST .../agents/<id>/stop {"subtree": bool}`: `{stopped: [ids]}`."""

    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str) -> None:
        subtree = bool_field(only_fields(self.body(), "subtree"), "subtree")
        self.reply(await self.desk.stop(self.session_id(session_id), subtree))


class AgentHandler(AgentsBase):
    """`DELETE .../agents/<id>`: take a sub-agent out of the tree (204)."""

    @web.authenticated
    @authorized
    @host_errors
    async def delete(self, session_id: str) -> None:
        await self.desk.delete(self.session_id(session_id))
        self.set_status(204)
        self.finish()


class AgentsEventsHandler(ExtensionHandlerMixin, JupyterHandler, websocket.WebSocketHandler):
    """`GET .../agents/events`: the overview on connect and again whenever a row changes."""

    auth_resource = AUTH_RESOURCE

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        user = self.current_user
        allowed = user is not None and await ensure_async(
            self.authorizer.is_authorized(self, user, "read", AUTH_RESOURCE)
        )
        if not allowed:
            raise web.HTTPError(403)
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    def open(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self._outbox: asyncio.Queue[AgentsOverview] = asyncio.Queue()
        self._pump = asyncio.ensure_future(self._forward())
        self._unwatch: Callable[[], None] = desk_of(self.settings).watch(self._outbox.put_nowait)

    async def _forward(self) -> None:
        while True:
            overview = await self._outbox.get()
            while not self._outbox.empty():  # a slow client gets the newest only
                overview = self._outbox.get_nowait()
            try:
                await self.write_message(json.dumps(overview))
            except websocket.WebSocketClosedError:
                return

    def on_message(self, message: str | bytes) -> None:
        """Clients only listen; actions go through the REST routes."""

    def on_close(self) -> None:
        self._unwatch()
        self._pump.cancel()


def agents_handlers() -> list[tuple[str, Any]]:
    """The routes, placed before the API's catch-all 404 in `handlers.handlers()`."""
    return [
        (r"/prime-agent/api/agents", AgentsHandler),
        (r"/prime-agent/api/agents/events", AgentsEventsHandler),
        (rf"/prime-agent/api/agents/{_SESSION}/message", AgentMessageHandler),
        (rf"/prime-agent/api/agents/{_SESSION}/stop", AgentStopHandler),
        (rf"/prime-agent/api/agents/{_SESSION}", AgentHandler),
    ]
