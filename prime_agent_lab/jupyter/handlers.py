"""REST and websocket handlers (docs/api.md) and the kernel bridge endpoints (docs/bridge.md)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import allow_unauthenticated, authorized, ws_authenticated
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web, websocket

from .. import __version__
from ..adapters.bridge_http import KERNEL_ROUTE, BridgeEndpoint
from ..core.bridge import BridgeService
from ..core.sessions import SessionError, check_session_id
from ..core.transcript import chat_transcript
from .host import AgentHost, HostError

AUTH_RESOURCE = "prime_agent"


class _Base(ExtensionHandlerMixin, APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def host(self) -> AgentHost:
        return self.settings["prime_agent_host"]

    def body(self) -> dict[str, Any]:
        try:
            data = json.loads(self.request.body or b"{}")
        except json.JSONDecodeError:
            raise web.HTTPError(400, "request body is not JSON") from None
        if not isinstance(data, dict):
            raise web.HTTPError(400, "request body must be a JSON object")
        return data

    def reply(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = getattr(exc, "log_message", None) or getattr(exc, "message", None) or self._reason
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message}))

    def session_id(self, raw: str) -> str:
        try:
            return check_session_id(raw)
        except SessionError as exc:
            raise web.HTTPError(400, str(exc)) from None


def _host_errors(method: Any) -> Any:
    async def wrapper(self: _Base, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        except HostError as exc:
            raise web.HTTPError(exc.status, exc.message) from None

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class InfoHandler(_Base):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        settings = self.host.settings
        self.reply(
            {
                "version": __version__,
                "provider": settings.provider_name,
                "model": settings.model,
                "output_cap": settings.agent.output_cap,
                "cell_timeout": settings.agent.cell_timeout,
            }
        )


class SessionsHandler(_Base):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.reply({"sessions": self.host.list_sessions()})

    @web.authenticated
    @authorized
    @_host_errors
    async def post(self) -> None:
        data = self.body()
        session_id = data.get("session_id")
        if session_id is not None:
            session_id = self.session_id(str(session_id))
        agent = await self.host.attach(
            str(data.get("notebook_path", "")),
            kernel_id=data.get("kernel_id") or None,
            session_id=session_id,
            new=bool(data.get("new", False)),
        )
        self.reply(self.host.info(agent))


class SessionHandler(_Base):
    @web.authenticated
    @authorized
    @_host_errors
    async def get(self, session_id: str) -> None:
        agent = self.host.agent(self.session_id(session_id))
        self.reply({**self.host.info(agent), "transcript": chat_transcript(agent.session)})


class MessagesHandler(_Base):
    @web.authenticated
    @authorized
    @_host_errors
    async def post(self, session_id: str) -> None:
        turn = await self.host.send(self.session_id(session_id), self.body().get("text", ""))
        self.reply({"turn": turn}, status=202)


class StopHandler(_Base):
    @web.authenticated
    @authorized
    @_host_errors
    async def post(self, session_id: str) -> None:
        self.reply({"stopped": await self.host.stop(self.session_id(session_id))})


class BindingsHandler(_Base):
    @web.authenticated
    @authorized
    @_host_errors
    async def post(self) -> None:
        data = self.body()
        self.host.bind(str(data.get("path", "")), str(data.get("kernel_id", "")))
        self.set_status(204)
        self.finish()


class EventsHandler(ExtensionHandlerMixin, JupyterHandler, websocket.WebSocketHandler):
    """Streams a session's events; replays buffered events newer than `?since=`."""

    auth_resource = AUTH_RESOURCE

    async def pre_get(self) -> None:
        user = self.current_user
        if user is None:
            raise web.HTTPError(403)
        allowed = await ensure_async(
            self.authorizer.is_authorized(self, user, "read", AUTH_RESOURCE)
        )
        if not allowed:
            raise web.HTTPError(403)

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        await self.pre_get()
        host: AgentHost = self.settings["prime_agent_host"]
        try:
            self._agent = host.agent(check_session_id(kwargs.get("session_id") or args[0]))
        except (HostError, SessionError) as exc:
            raise web.HTTPError(404, str(exc)) from None
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    def open(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        try:
            since = int(self.get_argument("since", "0"))
        except ValueError:
            since = 0
        bus = self._agent.events
        self._queue = bus.subscribe()
        for event in bus.since(since):
            self.write_message(json.dumps(event))
        self._pump = asyncio.ensure_future(self._forward())

    async def _forward(self) -> None:
        bus = self._agent.events
        while True:
            if self._queue.empty() and not bus.is_subscribed(self._queue):
                self.close(4000, "the event stream fell behind; reconnect with ?since=<last seq>")
                return
            event = await self._queue.get()
            try:
                await self.write_message(json.dumps(event))
            except websocket.WebSocketClosedError:
                return

    def on_message(self, message: str | bytes) -> None:
        """Clients only listen; commands go through the REST routes."""

    def on_close(self) -> None:
        self._agent.events.unsubscribe(self._queue)
        self._pump.cancel()


@web.stream_request_body
class _BridgeHandler(BridgeEndpoint, ExtensionHandlerMixin, JupyterHandler):
    """Kernel-only routes: authenticated by the HMAC signature, not by a Jupyter login."""

    async def prepare(self) -> None:  # type: ignore[override]
        self.limit_body()
        await ensure_async(super().prepare())

    def bridge_service(self) -> BridgeService:
        return self.settings["prime_agent_host"].bridge

    @allow_unauthenticated
    async def post(self, kernel_id: str) -> None:
        await self.answer_bridge(kernel_id)


class BridgeCallHandler(_BridgeHandler):
    operation = "call"


class BridgeJobHandler(_BridgeHandler):
    operation = "jobs"


_SESSION = r"(?P<session_id>[A-Za-z0-9][A-Za-z0-9_-]*)"


def handlers() -> list[tuple[str, Any]]:
    return [
        (r"/prime-agent/api/info", InfoHandler),
        (r"/prime-agent/api/sessions", SessionsHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}", SessionHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/messages", MessagesHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/stop", StopHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/events", EventsHandler),
        (r"/prime-agent/api/bindings", BindingsHandler),
        (rf"/prime-agent/bridge/kernels/{KERNEL_ROUTE}/call", BridgeCallHandler),
        (rf"/prime-agent/bridge/kernels/{KERNEL_ROUTE}/jobs", BridgeJobHandler),
    ]
