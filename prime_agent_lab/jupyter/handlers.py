"""REST and websocket handlers (docs/api.md) and the kernel bridge endpoints (docs/bridge.md)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import allow_unauthenticated, authorized, ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web, websocket

from ..adapters.bridge_http import KERNEL_ROUTE, BridgeEndpoint
from ..core.bridge import BridgeService
from ..core.commands import run_command
from ..core.project_context import ProjectFileError
from ..core.sessions import SessionError, check_session_id
from ..core.text import shorten
from ..core.transcript import chat_transcript
from ..version import __version__
from .handler_base import (
    AUTH_RESOURCE,
    ApiBase,
    JsonErrors,
    bool_field,
    host_errors,
    only_fields,
    text_field,
)
from .host import AgentHost, HostError


class InfoHandler(ApiBase):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        settings = self.host.settings
        self.reply(
            {
                "version": __version__,
                "provider": settings.provider,
                "model": settings.model,
                "output_cap": settings.output_cap,
                "cell_timeout": settings.cell_timeout,
                "locked_settings": list(settings.locked_settings),
            }
        )


class SessionsHandler(ApiBase):
    @web.authenticated
    @authorized
    @host_errors
    async def get(self) -> None:
        notebook = self.get_query_argument("notebook", None)
        if notebook is not None:  # the session list of one notebook (SessionList)
            self.reply({"sessions": await self.host.notebook_sessions(notebook)})
            return
        self.reply({"sessions": await self.host.list_sessions()})

    @web.authenticated
    @authorized
    @host_errors
    async def post(self) -> None:
        data = self.body()
        session_id = text_field(data, "session_id")
        agent = await self.host.attach(
            text_field(data, "notebook_path") or "",
            kernel_id=text_field(data, "kernel_id") or None,
            session_id=None if session_id is None else self.session_id(session_id),
            new=bool_field(data, "new"),
        )
        self.reply(self.host.info(agent))


class SessionHandler(ApiBase):
    @web.authenticated
    @authorized
    @host_errors
    async def get(self, session_id: str) -> None:
        agent = self.host.agent(self.session_id(session_id))
        transcript = chat_transcript(agent.session, self.host.runtime.child_state)
        queue = self.host.queue_state(agent.session_id)
        self.reply({**self.host.info(agent), "transcript": transcript, "queue": queue})

    @web.authenticated
    @authorized
    @host_errors
    async def delete(self, session_id: str) -> None:
        session_id = self.session_id(session_id)
        below = await self.host.delete_session(session_id)
        self.reply({"deleted": session_id, "sub_agents": below})


class MessagesHandler(ApiBase):
    """`POST .../messages {text, mode?}`: the user's message; while a turn runs it is queued
    (`follow_up`) or steers (`steer`), docs/pairing.md."""

    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str) -> None:
        data = self.body()
        text, mode = text_field(data, "text") or "", data.get("mode")
        self.reply(await self.host.post_message(self.session_id(session_id), text, mode), 202)


class QueuedMessageHandler(ApiBase):
    """`DELETE .../messages/<message_id>`: remove a queued message before it starts."""

    @web.authenticated
    @authorized
    @host_errors
    async def delete(self, session_id: str, message_id: str) -> None:
        state = self.host.remove_message(self.session_id(session_id), message_id)
        self.reply({"removed": message_id, "queue": state})


class SendNowHandler(ApiBase):
    """`POST .../messages/<message_id>/send`: a queued message goes now (Send now)."""

    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str, message_id: str) -> None:
        self.body()
        self.reply(self.host.send_message_now(self.session_id(session_id), message_id), 202)


class StopHandler(ApiBase):
    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str) -> None:
        tree = bool_field(self.body(), "tree")
        self.reply({"stopped": await self.host.stop(self.session_id(session_id), tree=tree)})


class TreeHandler(ApiBase):
    @web.authenticated
    @authorized
    @host_errors
    async def get(self, session_id: str) -> None:
        self.reply(await self.host.session_tree(self.session_id(session_id)))


class StepsHandler(ApiBase):
    """`GET .../steps`: the session's steps for the step-through (docs/teaching.md)."""

    @web.authenticated
    @authorized
    @host_errors
    async def get(self, session_id: str) -> None:
        self.reply(await self.host.session_steps(self.session_id(session_id)))


class LeafHandler(ApiBase):
    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str) -> None:
        entry_id = self.body().get("entry_id")
        self.reply(await self.host.move_leaf(self.session_id(session_id), entry_id))


class ForkHandler(ApiBase):
    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str) -> None:
        entry_id = self.body().get("entry_id")
        self.reply(await self.host.fork(self.session_id(session_id), entry_id), status=201)


class CloneHandler(ApiBase):
    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str) -> None:
        self.body()
        self.reply(await self.host.clone(self.session_id(session_id)), status=201)


class CommandHandler(ApiBase):
    """`POST .../commands/<name> {args?}`: a chat command, `args` the text after its name
    (core/commands.py)."""

    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str, name: str) -> None:
        args = text_field(self.body(), "args") or ""
        self.reply(await run_command(self.host, self.session_id(session_id), name, args))


class RefineHandler(ApiBase):
    """`POST .../refine {instructions?, global?}`: plan a refinement (docs/harness.md)."""

    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str) -> None:
        data = self.body()
        instructions, global_ = text_field(data, "instructions"), bool_field(data, "global")
        answer = self.host.refine(self.session_id(session_id), instructions, global_)
        self.reply(answer, status=202 if answer.get("scheduled") else 200)


class RefinementsHandler(ApiBase):
    @web.authenticated
    @authorized
    @host_errors
    async def get(self, session_id: str) -> None:
        self.reply(await self.host.refinements(self.session_id(session_id)))


class RollbackHandler(ApiBase):
    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str, refinement_id: str) -> None:
        self.body()
        answer = await self.host.rollback_refinement(self.session_id(session_id), refinement_id)
        self.reply(answer, status=202 if answer.get("queued") else 200)


class TrustHandler(ApiBase):
    """`GET .../trust`: what in the session's folder (and its sub-agents') this user did not
    sign; `POST .../trust`: trust it and load it (docs/trust.md)."""

    @web.authenticated
    @authorized
    @host_errors
    async def get(self, session_id: str) -> None:
        self.reply(await self.host.untrusted(self.session_id(session_id)))

    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str) -> None:
        self.body()
        self.reply(await self.host.trust(self.session_id(session_id)))


class AutonomyHandler(ApiBase):
    """`GET .../autonomy`: the session's autonomous mode and run (`AutonomyState`); `PUT`: turn
    it on or off with budgets and gates (`AutonomyUpdate`), docs/autonomy.md."""

    @web.authenticated
    @authorized
    @host_errors
    async def get(self, session_id: str) -> None:
        self.reply(self.host.autonomy_state(self.session_id(session_id)))

    @web.authenticated
    @authorized
    @host_errors
    async def put(self, session_id: str) -> None:
        self.reply(self.host.set_autonomy(self.session_id(session_id), self.body()))


class BindingsHandler(ApiBase):
    @web.authenticated
    @authorized
    @host_errors
    async def post(self) -> None:
        data = self.body()
        text_field(data, "document_id")
        self.host.bind(text_field(data, "path") or "", text_field(data, "kernel_id") or "")
        self.set_status(204)
        self.finish()


class ContextHandler(ApiBase):
    """`GET .../context`: the `/context` report (docs/project-context.md)."""

    @web.authenticated
    @authorized
    @host_errors
    async def get(self, session_id: str) -> None:
        reply = await run_command(self.host, self.session_id(session_id), "context", "")
        self.reply(reply["answer"])


class ContextTrustHandler(ApiBase):
    """`POST /prime-agent/api/context/trust {path, sha256}`: trust exactly those bytes of a
    project file (409 when it changed since)."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        data = self.body()
        path, digest = text_field(data, "path"), text_field(data, "sha256")
        if not digest:
            raise web.HTTPError(400, "sha256 is required: the digest /context showed")
        try:
            trusted = self.host.runtime.project.trust(path or "", digest)
        except ProjectFileError as exc:
            raise web.HTTPError(exc.status, exc.message) from None
        self.reply({"trusted": trusted.as_dict()})


class ModelsHandler(ApiBase):
    """`GET /prime-agent/api/models`: the models a session may switch to (`ModelList`), those
    of `rlm.find_models()`, each with its context window and list price when declared."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.reply(self.host.models())


class SessionModelHandler(ApiBase):
    """`POST .../model {model}`: the session's next model call uses `model` (400 naming the
    offered ones otherwise); answers the `ModelList` with `current`."""

    @web.authenticated
    @authorized
    @host_errors
    async def post(self, session_id: str) -> None:
        model = only_fields(self.body(), "model").get("model")
        self.reply(await self.host.switch_model(self.session_id(session_id), model))


class UsageHandler(ApiBase):
    """`GET .../usage`: the `/usage` report (tokens and cost, own and with sub-agents)."""

    @web.authenticated
    @authorized
    @host_errors
    async def get(self, session_id: str) -> None:
        reply = await run_command(self.host, self.session_id(session_id), "usage", "")
        self.reply(reply["answer"])


class NotFoundHandler(ApiBase):
    """Any other route under `prime-agent/api/`: a JSON 404 like every other API error."""

    def _no_route(self) -> None:
        raise web.HTTPError(404, f"no such API route: {shorten(self.request.path)}")

    @web.authenticated
    async def get(self, *args: Any) -> None:
        self._no_route()

    @web.authenticated
    async def post(self, *args: Any) -> None:
        self._no_route()

    @web.authenticated
    async def put(self, *args: Any) -> None:
        self._no_route()

    @web.authenticated
    async def patch(self, *args: Any) -> None:
        self._no_route()

    @web.authenticated
    async def delete(self, *args: Any) -> None:
        self._no_route()


class EventsHandler(JsonErrors, ExtensionHandlerMixin, JupyterHandler, websocket.WebSocketHandler):
    """Streams a session's events; replays buffered events newer than `?since=`."""

    auth_resource = AUTH_RESOURCE
    stall_timeout = 30.0  # seconds a client may take to accept one message before it is closed

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
        # Subscribed and read in the same step: the backlog and the queue neither overlap nor gap.
        self._pump = asyncio.ensure_future(self._forward(bus.since(since)))

    async def _forward(self, backlog: list[dict[str, Any]]) -> None:
        """One message at a time, each awaited until the socket took it, so a client that does
        not read holds one message on the server, not the whole replay."""
        bus = self._agent.events
        for event in backlog:
            if not await self._send(event):
                return
        while True:
            if self._queue.empty() and not bus.is_subscribed(self._queue):
                self._give_up("the event stream fell behind")
                return
            if not await self._send(await self._queue.get()):
                return

    async def _send(self, event: dict[str, Any]) -> bool:
        try:
            written = self.write_message(json.dumps(event))
            await asyncio.wait_for(written, self.stall_timeout)
        except websocket.WebSocketClosedError:
            return False
        except TimeoutError:
            self._give_up(f"the client took no message for {self.stall_timeout:g} s")
            return False
        return True

    def _give_up(self, why: str) -> None:
        self._agent.events.unsubscribe(self._queue)
        self.close(4000, f"{why}; reconnect with ?since=<last seq>")

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
_REFINEMENT = r"(?P<refinement_id>[A-Za-z0-9][A-Za-z0-9_-]*)"
_COMMAND = r"(?P<name>[A-Za-z0-9_-]+)"
_MESSAGE = r"(?P<message_id>[A-Za-z0-9][A-Za-z0-9_-]*)"
_TOOL_CALL = r"(?P<tool_call_id>[A-Za-z0-9_.:-]{1,200})"
_TURN = r"(?P<turn>[0-9]{1,9})"


def handlers() -> list[tuple[str, Any]]:
    from .handlers_agents import agents_handlers  # the Agents View (docs/agents-view.md)
    from .handlers_permission import CellDecisionHandler, PermissionHandler  # they use ApiBase
    from .handlers_review import TurnRevertHandler, TurnReviewHandler

    return [
        (r"/prime-agent/api/info", InfoHandler),
        (r"/prime-agent/api/sessions", SessionsHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}", SessionHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/messages", MessagesHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/messages/{_MESSAGE}", QueuedMessageHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/messages/{_MESSAGE}/send", SendNowHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/stop", StopHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/events", EventsHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/tree", TreeHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/steps", StepsHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/leaf", LeafHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/fork", ForkHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/clone", CloneHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/commands/{_COMMAND}", CommandHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/refine", RefineHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/refinements", RefinementsHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/trust", TrustHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/context", ContextHandler),
        (r"/prime-agent/api/context/trust", ContextTrustHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/autonomy", AutonomyHandler),
        (
            rf"/prime-agent/api/sessions/{_SESSION}/refinements/{_REFINEMENT}/rollback",
            RollbackHandler,
        ),
        (r"/prime-agent/api/bindings", BindingsHandler),
        (r"/prime-agent/api/models", ModelsHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/model", SessionModelHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/usage", UsageHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/permission", PermissionHandler),
        (
            rf"/prime-agent/api/sessions/{_SESSION}/cells/{_TOOL_CALL}/(?P<action>approve|skip)",
            CellDecisionHandler,
        ),
        (rf"/prime-agent/api/sessions/{_SESSION}/turns/{_TURN}", TurnReviewHandler),
        (rf"/prime-agent/api/sessions/{_SESSION}/turns/{_TURN}/revert", TurnRevertHandler),
        *agents_handlers(),
        (r"/prime-agent/api/.*", NotFoundHandler),
        (rf"/prime-agent/bridge/kernels/{KERNEL_ROUTE}/call", BridgeCallHandler),
        (rf"/prime-agent/bridge/kernels/{KERNEL_ROUTE}/jobs", BridgeJobHandler),
    ]
