"""The chat's steer and queue (docs/pairing.md, "Steer and queue"): the part of `AgentHost` behind
`POST .../messages {text, mode}`, `DELETE .../messages/<message_id>` and
`POST .../messages/<message_id>/send`. The queue itself is the mailbox's (core/chat_queue.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import get_args

from ..core.chat_queue import ChatQueue
from ..core.family import FamilyError
from ..core.runtime import AgentRuntime
from ..core.text import json_type, shorten
from ..core.wire import DeliveryMode, MessagePosted, QueueState
from .host_errors import HostError, attached, refuse_long_text

MODES: tuple[DeliveryMode, ...] = get_args(DeliveryMode)


def checked_mode(mode: object) -> DeliveryMode:
    """`mode` of a chat message: absent or null is `auto`; anything else unknown is a 400."""
    if mode is None:
        return "auto"
    if isinstance(mode, str) and mode in MODES:
        return mode  # type: ignore[return-value]
    shown = shorten(mode, 40) if isinstance(mode, str) else json_type(mode)
    raise HostError(400, f'mode must be "auto", "steer" or "follow_up", not {shown}')


class HostQueue:
    runtime: AgentRuntime
    send: Callable[[str, str], Awaitable[int]]  # AgentHost's: a turn starts with the text

    @property
    def _chat(self) -> ChatQueue:
        return self.runtime.mailbox.chat

    def queue_state(self, session_id: str) -> QueueState:
        return self._chat.state(session_id)

    async def post_message(self, session_id: str, text: object, mode: object) -> MessagePosted:
        """The user's message. Idle: it starts a turn (whatever the mode). While a turn runs:
        `steer` enters it at its next model call, `follow_up` (and `auto`) waits until the run
        ends; both are journaled in the mailbox and removable until they start."""
        wanted = checked_mode(mode)
        if not isinstance(text, str) or not text.strip():
            raise HostError(400, "message text is required")
        refuse_long_text(text, self.runtime.settings, "message")
        agent = attached(self.runtime.agents, session_id)
        if not agent.running:
            self._chat.resume(session_id)  # what a Stop held goes on after this turn
            try:
                turn = await self.send(session_id, text)
            except HostError as exc:
                if exc.status != 409 or not agent.running:  # else: another agent's message
                    raise  # started a turn meanwhile, and this one is queued for after it
            else:
                return {"mode": wanted, "delivery_status": "started", "turn": turn}
        queued: DeliveryMode = "steer" if wanted == "steer" else "follow_up"
        try:
            mail = self._chat.send(agent, text, queued, self.runtime.settings.message_max_pending)
        except FamilyError as exc:
            raise HostError(exc.status, exc.message) from None
        return {
            "mode": queued,
            "delivery_status": "queued",
            "message_id": mail.message_id,
            "queue": self._chat.state(session_id),
        }

    def remove_message(self, session_id: str, message_id: str) -> QueueState:
        """Withdraw a queued message (404 unknown, 409 already started)."""
        agent = attached(self.runtime.agents, session_id)
        try:
            self._chat.remove(agent, message_id)
        except FamilyError as exc:
            raise HostError(exc.status, exc.message) from None
        return self._chat.state(session_id)

    def send_message_now(self, session_id: str, message_id: str) -> MessagePosted:
        """Send now: into the running turn at its next model call, or as a turn at once."""
        agent = attached(self.runtime.agents, session_id)
        turn = agent.session.turns() + 1
        try:
            how = self._chat.send_now(agent, message_id)
        except FamilyError as exc:
            raise HostError(exc.status, exc.message) from None
        answer: MessagePosted = {
            "mode": "steer" if how == "steer" else "follow_up",
            "delivery_status": "steer" if how == "steer" else "started",
            "message_id": message_id,
            "queue": self._chat.state(session_id),
        }
        if how == "turn":
            answer["turn"] = turn
        return answer
