"""The user's messages from the chat while a turn runs: steer and queued follow-ups.

They are mailbox messages (core/mailbox.py) whose sender is the user: journaled, signed, in the
session's `mailbox.jsonl` before anything else happens to them, and delivered by the mailbox's
own paths. A `steer` is taken by the loop's `inbox` hook at the running turn's next model-call
boundary (recorded as an `agent_message` entry with `from_user`, shown as the user's message
where it entered); a `follow_up` waits until the run ends and then starts the next turn. Rules
of their own (docs/pairing.md, "Steer and queue"):

- each of the user's follow-ups is a turn of its own, in the order they were queued (another
  agent's follow-ups that wait together still share one turn);
- a run that ends by Stop (or a server shutdown) holds the queue: nothing in it starts by
  itself until the user sends again (a new message, or Send now on one item); the queue a
  restart recovers is held the same way, so no turn starts unattended;
- until it is taken, a message can be removed (its mailbox record is closed as `dropped`).

Every change is a `queue` event carrying the whole queue (`QueueState`), so every viewer of the
session shows the same list in the same order; GET session carries it too, for a reload.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, Protocol

from .agent import Agent
from .events import Event
from .family import FamilyError
from .mail import DeliveryStatus, Mail
from .sessions import now_iso
from .wire import DeliveryMode, QueueChange, QueuedMessage, QueueState


class MailQueue(Protocol):
    """What the user's queue uses of the mailbox (core/mailbox.py, which owns a ChatQueue)."""

    def waiting_mail(self, target_id: str) -> list[Mail]: ...

    def pending(self, session_id: str) -> int: ...

    def post(self, mail: Mail) -> DeliveryStatus: ...

    def withdraw(self, target_id: str, mail: Mail, reason: str) -> None: ...

    def to_front(self, target_id: str, mail: Mail) -> None: ...

    def deliver_waiting(self, session_id: str) -> None: ...

    def waiting(self, target_id: str, message_id: str) -> bool: ...


HOLDS_THE_QUEUE = frozenset({"stopped", "shutdown"})
"""A run that ended this way holds the user's queue (the user cut it; they decide what next)."""

USER = "user"  # the sender name a user's message carries in the mailbox journal


class ChatQueue:
    """The user's queued messages of every agent of one runtime, over its mailbox."""

    def __init__(self, mailbox: MailQueue, agents: Callable[[], dict[str, Agent]]) -> None:
        self._mailbox = mailbox
        self._agents = agents

    # ------------------------------------------------------------ reading

    def items(self, session_id: str) -> list[Mail]:
        """The user's messages waiting for `session_id`, in the order they were queued (Send
        now moves one first)."""
        return [m for m in self._mailbox.waiting_mail(session_id) if m.from_user]

    def state(self, session_id: str) -> QueueState:
        items = self.items(session_id)
        return {
            "items": [_queued(m) for m in items],
            "paused": any(m.held for m in items),
        }

    # ------------------------------------------------------------ the user's actions

    def send(self, agent: Agent, text: str, mode: DeliveryMode, limit: int) -> Mail:
        """Queue `text` for `agent`'s running turn (`steer`) or for after its run
        (`follow_up`). Sending lifts a hold: the queue goes on after this."""
        waiting = self._mailbox.pending(agent.session_id)
        if waiting >= limit:
            raise FamilyError(
                429,
                f"{waiting} messages already wait for this session (the limit is {limit}); "
                "remove one or wait until the agent has taken them. Nothing was sent.",
            )
        mail = Mail(
            message_id=f"user_{secrets.token_hex(8)}",
            to_session_id=agent.session_id,
            to_name=agent.session.notebook_path,
            from_session_id=agent.session_id,
            from_name=USER,
            relationship=None,
            composed=now_iso(),
            mode=mode,
            body=text,
            from_user=True,
        )
        self.resume(agent.session_id)
        self._mailbox.post(mail)
        self.changed(agent.session_id, "queued", mail.message_id)
        return mail

    def remove(self, agent: Agent, message_id: str) -> None:
        """Withdraw one of the user's messages before it is taken."""
        mail = self._own(agent, message_id)
        self._mailbox.withdraw(agent.session_id, mail, "removed by the user")
        self.changed(agent.session_id, "removed", message_id)

    def send_now(self, agent: Agent, message_id: str) -> str:
        """The user's "Send now" on a queued message: it enters the running turn at its next
        model call, or starts a turn at once when none runs; the rest of the queue goes on
        after it. `steer` or `turn` (how it was sent)."""
        mail = self._own(agent, message_id)
        self.resume(agent.session_id)
        self._mailbox.to_front(agent.session_id, mail)
        if agent.running:
            mail.released = True
            self.changed(agent.session_id, "resumed", message_id)
            return "steer"
        self.changed(agent.session_id, "resumed", message_id)
        self._mailbox.deliver_waiting(agent.session_id)
        return "turn"

    def resume(self, session_id: str) -> None:
        """The user sent again: held messages go on (follow-ups after the next run)."""
        held = [m for m in self.items(session_id) if m.held]
        for mail in held:
            mail.held = False
        if held:
            self.changed(session_id, "resumed")

    # ------------------------------------------------------------ the mailbox's side

    def turn_ended(self, agent: Agent, stop_reason: str) -> None:
        """A run the user stopped holds the user's messages: they wait for the user."""
        if stop_reason not in HOLDS_THE_QUEUE:
            return
        held = [m for m in self.items(agent.session_id) if not m.held]
        for mail in held:
            mail.held = True
        if held:
            self.changed(agent.session_id, "paused")

    def listener(self, agent: Agent) -> Callable[[Event], None]:
        """Tells every viewer when one of the user's messages was taken (it left the queue)."""

        def taken(event: Event) -> None:
            message_id = event.get("message_id")
            if event["type"] in ("turn_started", "agent_message") and event.get("from_user"):
                self.changed(agent.session_id, "started", message_id)

        return taken

    def changed(self, session_id: str, change: QueueChange, message_id: Any = None) -> None:
        agent = self._agents().get(session_id)
        if agent is None:
            return
        fields: dict[str, Any] = {"change": change, "state": self.state(session_id)}
        if isinstance(message_id, str):
            fields["message_id"] = message_id
        agent.events.emit("queue", **fields)

    def _own(self, agent: Agent, message_id: str) -> Mail:
        """The user's waiting message `message_id`, or a 404 / 409 that says why not."""
        mail = next((m for m in self.items(agent.session_id) if m.message_id == message_id), None)
        if mail is not None:
            return mail
        if self._mailbox.waiting(agent.session_id, message_id):
            raise FamilyError(
                409, f"message {message_id} is another agent's; only your own can be changed"
            )
        for entry in agent.session.entries:
            if entry.get("message_id") == message_id and entry["type"] in (
                "user_message",
                "agent_message",
            ):
                raise FamilyError(
                    409, f"message {message_id} already started (turn {entry.get('turn')})"
                )
        raise FamilyError(404, f"no queued message {message_id} in this session")


def _queued(mail: Mail) -> QueuedMessage:
    return {
        "message_id": mail.message_id,
        "text": mail.body,
        "mode": "steer" if mail.mode == "steer" else "follow_up",
        "composed": mail.composed,
    }
