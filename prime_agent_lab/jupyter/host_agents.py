"""What the Agents View does to agents (docs/agents-view.md): message one as the user acting as
the root's owner, stop one or its subtree, delete a sub-agent. The overview itself is built by
core/agents_overview.py; the routes are in handlers_agents.py."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.agents_overview import AgentsOverviewBuilder
from ..core.family import FamilyError, Member
from ..core.text import preview
from ..core.wire import AgentMessageSent, AgentsOverview, AgentsStopped
from .host_errors import HostError

if TYPE_CHECKING:
    from .host import AgentHost

log = logging.getLogger(__name__)
WATCH_INTERVAL = 0.25  # seconds: live updates are coalesced to at most four a second


class AgentsDesk:
    """The Agents View's actions and its live overview, for one host."""

    def __init__(self, host: AgentHost) -> None:
        self.host = host
        self.builder = AgentsOverviewBuilder(host.runtime)
        self._watchers: set[Callable[[AgentsOverview], None]] = set()
        self._watch: asyncio.Task[None] | None = None
        self._first: set[Callable[[AgentsOverview], None]] = set()  # owed the rows as they are

    # ------------------------------------------------------------ reading

    def member(self, session_id: str, *, stopping: bool = False) -> Member:
        """The member an action names: 404 when unknown, 409 with the reason when its header
        is refused (core/member_rules.py) or its folder is gone: no action loads, messages,
        stops or deletes it."""
        member = self.host.runtime.family.member(session_id)
        if member is None:
            raise HostError(404, f"no agent {preview(session_id, 80)}")
        if member.refused or (member.vanished and not stopping):  # a Stop still stops it
            refusal = member.refusal()
            raise HostError(refusal.status, refusal.message)
        return member

    async def overview(self, state: Any = None) -> AgentsOverview:
        """The overview, with the logs that changed read in a worker thread: a large log that
        keeps growing (a headless run in the same folder) never holds the event loop."""
        await asyncio.to_thread(self.builder.read_logs)
        return self.builder.overview(state)

    # ------------------------------------------------------------ messages

    async def message(self, session_id: str, text: object) -> AgentMessageSent:
        """A root takes `text` as the user's chat message; its direct sub-agents as mail from
        it. Deeper agents are out of the user's reach (core/reach.py: parent, siblings and
        children reach an agent)."""
        body = self._checked_text(text)
        member = self.member(session_id)
        runtime = self.host.runtime
        if member.parent_session_id is None:
            self._resident_root(member)
            await self.host.post_message(session_id, body, "auto")
            return {"delivered": "chat"}
        parent = self.member(member.parent_session_id)
        if parent.parent_session_id is not None:
            raise HostError(
                403,
                f"{member.display_name!r} is a sub-agent of {parent.display_name!r}: only its "
                f"parent {parent.display_name!r}, its siblings and its own sub-agents reach it. "
                "You act as the root's owner: message the root or its direct sub-agents.",
            )
        root = self._resident_root(parent)
        try:
            await self._comes_back(member.session_id)
            runtime.mailbox.send(root, body, "child", member.session_id, "auto")
        except FamilyError as exc:
            raise HostError(exc.status, exc.message) from None
        return {"delivered": "mail"}

    async def _comes_back(self, session_id: str) -> None:
        """Load an evicted sub-agent before mail is queued for it: one that can never come back
        (its model is not offered here, its header is refused) is refused now, not left
        waiting for mail for ever; a passing failure leaves the mail queued, as it was."""
        runtime = self.host.runtime
        if session_id in runtime.agents:
            return
        try:
            await runtime.ensure_loaded(session_id)
        except FamilyError as exc:
            if exc.lasting:
                raise
            log.info("message for %s is queued: %s", session_id, exc.message)
        except Exception:
            log.warning("loading %s for a message failed; it is queued", session_id, exc_info=True)

    def _checked_text(self, text: object) -> str:
        if not isinstance(text, str) or not text.strip():
            raise HostError(400, "text is required: a non-empty string")
        settings = self.host.runtime.settings
        chars, size = settings.max_message_chars, settings.message_max_bytes
        if len(text) > chars or len(text.encode("utf-8")) > size:
            raise HostError(
                400,
                f"the message has {len(text):,} characters; the limit is {chars:,} characters "
                f"and {size:,} bytes. Put long content in a file and send its path.",
            )
        return text

    def _resident_root(self, member: Member) -> Any:
        agent = self.host.runtime.agents.get(member.session_id)
        if agent is None:
            raise HostError(
                409,
                f"the root {member.display_name!r} is not open: open its notebook "
                f"({member.notebook_path}) to message it or its sub-agents",
            )
        return agent

    # ------------------------------------------------------------ stop and delete

    async def stop(self, session_id: str, subtree: bool) -> AgentsStopped:
        self.member(session_id, stopping=True)
        runtime = self.host.runtime
        if subtree:
            return {"stopped": await runtime.stop_subtree(session_id)}
        agent = runtime.agents.get(session_id)
        return {"stopped": [session_id] if agent is not None and await agent.stop() else []}

    async def delete(self, session_id: str) -> None:
        member = self.member(session_id)
        if member.parent_session_id is None:
            raise HostError(
                400,
                f"{member.display_name!r} is a root agent: delete its session from the "
                "notebook's session list",
            )
        try:
            await self.host.runtime.delete_member(member)
        except FamilyError as exc:
            raise HostError(exc.status, exc.message) from None

    # ------------------------------------------------------------ live updates

    def watch(self, send: Callable[[AgentsOverview], None]) -> Callable[[], None]:
        """Call `send` with the overview now and whenever a row changes (checked every
        WATCH_INTERVAL while anyone watches); returns the function that stops watching."""
        self._watchers.add(send)
        if self._watch is None or self._watch.done():
            self._watch = asyncio.ensure_future(self._watch_rows())
        else:
            self._first.add(send)
        return lambda: self._watchers.discard(send)

    async def _watch_rows(self) -> None:
        last = None
        while self._watchers:
            overview = await self.overview()
            key = _rows_key(overview)
            first, self._first = self._first, set()
            for send in list(self._watchers):
                if key != last or send in first:
                    send(overview)
            last = key
            await asyncio.sleep(WATCH_INTERVAL)
        self._first.clear()

    def close(self) -> None:
        self._watchers.clear()
        if self._watch is not None:
            self._watch.cancel()


def _rows_key(overview: AgentsOverview) -> str:
    return json.dumps(overview["agents"], sort_keys=True)


def desk_of(settings: dict[str, Any]) -> AgentsDesk:
    """The host's Agents View desk, made on first use (kept in the web app's settings)."""
    desk = settings.get("prime_agent_agents_desk")
    if desk is None:
        desk = settings["prime_agent_agents_desk"] = AgentsDesk(settings["prime_agent_host"])
    return desk  # type: ignore[no-any-return]
