"""Messages between the agents of one family: the router and the mailboxes of one runtime.

An agent reaches its parent, its siblings (all roots are siblings of each other; only loaded roots
count, as old root sessions pile up on disk) and its direct children. The sender is always the
calling agent, proved by the bridge; nothing in a payload can name another sender.

A message is written to the target's `mailbox.jsonl` before anything else happens to it, then:
- target idle: it starts a turn at once (receipt `delivered`);
- target busy: `steer` (and `auto`) wait for the target's next model-call boundary, where the
  loop's `inbox` hook takes them; `follow_up` waits until the target's run ends and then starts
  the next turn (all follow-ups waiting then are delivered in that one turn, in order);
- target not loaded: it waits on disk and in memory until the target is loaded.
A queued record carries this user's signature (core/trust.py): one that does not (a mailbox in
someone else's folder) is listed as untrusted and never delivered, so it cannot start a turn or
load an agent at server start, until the user trusts that session (`trust_queued`).
The runtime's notices to a parent (its child finished or failed, `notify`) are journaled and
delivered the same way, as `auto` mail from the child, so they too survive a crash.
A message counts as delivered once its entry (`user_message` or `agent_message`, carrying its
`message_id`) is in the target's log; the mailbox marks it `taken` only after that entry was
written, so recovery after a crash re-queues exactly the messages whose entry is missing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

from .agent import Agent, InboxMessage, TurnInProgress
from .caller import TreeRuntime
from .chat_queue import ChatQueue
from .entry_types import TOLD_AS_MESSAGES
from .events import Event
from .family import SESSION_UNREADABLE, FamilyError, Member
from .jsonfile import MAX_MAILBOX_BYTES, BadJson, UnreadableFile, read_jsonl
from .mail import MODES, Backlog, Bucket, DeliveryStatus, Mail, Receipt
from .reach import Relative, member_name, relatives, resolve_receiver
from .sessions import SessionError, now_iso
from .text import json_type, shorten
from .trust import Signer
from .whole_writes import append_whole
from .wire import DeliveryMode, Relationship

log = logging.getLogger(__name__)

MAILBOX_FILE = "mailbox.jsonl"
SIGNED_FOR = "mail"  # the signature purpose of a queued record (core/trust.py)
UNREADABLE_REASON = "its session cannot be read (the file is damaged or gone)"

_INVERSE: dict[Relationship, Relationship] = {
    "parent": "child",
    "child": "parent",
    "sibling": "sibling",
}


class MessageRefused(FamilyError):
    """A send the mailbox refuses (size, rate, pending limit); nothing was sent."""


# ---------------------------------------------------------------- the router


class Mailbox:
    """The mailboxes of one runtime's agents, and the rules for reaching them."""

    def __init__(self, runtime: TreeRuntime, clock: Callable[[], float] = time.monotonic) -> None:
        self._runtime = runtime
        self.clock = clock
        self._pending: dict[str, list[Mail]] = {}  # target session id -> messages, in order
        self._buckets: dict[tuple[str, str], Bucket] = {}
        self._deliveries: set[asyncio.Future[None]] = set()  # under way in the background
        self._closed = False
        self.chat = ChatQueue(self, lambda: self._runtime.agents)  # the user's own messages

    # ------------------------------------------------------------ reading the family

    def loaded(self) -> dict[str, str]:
        """Loaded agents' session ids and where their notebooks are now."""
        return {sid: a.session.notebook_path for sid, a in self._runtime.agents.items()}

    def relatives(self, agent: Agent) -> list[Relative]:
        return relatives(self._runtime.family, agent.session_id, self.loaded())

    def pending(self, session_id: str) -> int:
        """Messages waiting for `session_id` (not yet in its log)."""
        return len(self._pending.get(session_id, ()))

    def entering_turn(self, session_id: str) -> bool:
        """Some message waits to enter `session_id`'s running turn (its `inbox` would take it)."""
        return any(m.enters_running_turn for m in self._pending.get(session_id, ()))

    def has_pending(self) -> bool:
        return any(self._pending.values())

    def deliveries(self) -> list[asyncio.Future[None]]:
        """Deliveries under way (a target being opened from disk for its messages): the tree
        is not quiet until they are done."""
        return [task for task in self._deliveries if not task.done()]

    def _in_background(self, delivery: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(delivery)
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)
        self._runtime.spawn(task)

    # ------------------------------------------------------------ sending

    def send(
        self,
        sender: Agent,
        message: object,
        receiver_role: object,
        receiver_name: object = None,
        mode: object = "auto",
    ) -> Receipt:
        """Send `message` from `sender` (the verified caller) to one family member. Never waits
        for the target. Raises FamilyError (MessageRefused for the limits): nothing was sent."""
        body = self._checked_body(message)
        checked_mode = _checked_mode(mode)
        target = resolve_receiver(
            self._runtime.family, sender.session_id, self.loaded(), receiver_role, receiver_name
        )
        return self._send_to(sender, target, body, checked_mode)

    def broadcast(self, sender: Agent, message: object, mode: object = "auto") -> list[Receipt]:
        """`message` to every family member, one receipt each; one member's failure (a limit, a
        deleted target) is its receipt's `error` and does not stop the others."""
        body = self._checked_body(message)
        checked_mode = _checked_mode(mode)
        receipts = []
        for target in self.relatives(sender):
            try:
                receipts.append(self._send_to(sender, target, body, checked_mode))
            except FamilyError as exc:
                receipts.append(
                    Receipt(
                        message_id=None,
                        target=target.name,
                        target_session_id=target.member.session_id,
                        relationship=target.relationship,
                        mode=checked_mode,
                        delivery_status="failed",
                        time=now_iso(),
                        error=exc.message,
                    )
                )
        return receipts

    def _checked_body(self, message: object) -> str:
        if not isinstance(message, str):
            raise MessageRefused(400, f"message must be text (a str), not {json_type(message)}")
        body = message.strip()
        if not body:
            raise MessageRefused(400, "the message is empty")
        size, limit = len(body.encode("utf-8")), self._runtime.settings.message_max_bytes
        if size > limit:
            raise MessageRefused(
                413,
                f"the message is {size:,} bytes; the limit is {limit:,} bytes "
                f"({limit / 1024:g} KiB). Put long content in a file and send its path. "
                "Nothing was sent.",
            )
        return body

    def _send_to(self, sender: Agent, target: Relative, body: str, mode: DeliveryMode) -> Receipt:
        if self._closed:
            raise MessageRefused(503, "the host is shutting down; nothing was sent")
        target_id = target.member.session_id
        bucket = self._take_token(sender.session_id, target)
        self._check_room(target)
        mail = Mail(
            message_id=f"msg_{secrets.token_hex(8)}",
            to_session_id=target_id,
            to_name=target.name,
            from_session_id=sender.session_id,
            from_name=member_name(self._sender_member(sender), self.loaded()),
            relationship=_INVERSE[target.relationship],
            composed=now_iso(),
            mode=mode,
            body=body,
        )
        try:
            self._write(target_id, self._runtime.signer.sign_object(SIGNED_FOR, mail.record()))
            status = self._deliver(mail)
        except Exception:
            bucket.refund(self._runtime.settings.message_rate_burst)
            raise
        receipt = Receipt(
            message_id=mail.message_id,
            target=target.name,
            target_session_id=target_id,
            relationship=target.relationship,
            mode=mode,
            delivery_status=status,
            time=mail.composed,
        )
        self._record_sent(sender, mail, receipt)
        return receipt

    def _sender_member(self, sender: Agent) -> Member:
        member = self._runtime.family.member(sender.session_id)
        if member is None:
            raise FamilyError(404, f"session {sender.session_id} is not in the agent family")
        return member

    def _take_token(self, sender_id: str, target: Relative) -> Bucket:
        settings = self._runtime.settings
        rate, burst = settings.message_rate_per_second, settings.message_rate_burst
        now = self.clock()
        key = (sender_id, target.member.session_id)
        bucket = self._buckets.setdefault(key, Bucket(float(burst), now))
        if not bucket.take(now, rate, burst):
            raise MessageRefused(
                429,
                f'too many messages to {target.relationship} "{target.name}": at most {burst} '
                f"at once and {rate:g} per second to one agent; try again in "
                f"{bucket.wait(rate):.2f} s. Nothing was sent.",
            )
        return bucket

    def _check_room(self, target: Relative) -> None:
        waiting, limit = self.pending(target.member.session_id), self._runtime.settings
        if waiting >= limit.message_max_pending:
            raise MessageRefused(
                429,
                f'{target.relationship} "{target.name}" already has {waiting} messages waiting '
                f"(the limit is {limit.message_max_pending}); wait until it has taken them. "
                "Nothing was sent.",
            )

    def _record_sent(self, sender: Agent, mail: Mail, receipt: Receipt) -> None:
        fields: dict[str, Any] = {
            "message_id": mail.message_id,
            "to_session_id": mail.to_session_id,
            "to_name": mail.to_name,
            "relationship": receipt.relationship,
            "mode": mail.mode,
            "delivery_status": receipt.delivery_status,
            "text": mail.body,
        }
        if sender.running:
            fields["turn"] = sender.session.turns()
        sender.session.append("message_sent", **fields)

    def notify(self, parent_id: str, child: Agent, kind: str, text: str) -> None:
        """The runtime tells `parent_id` how its child's task ended. Journaled and delivered
        like a message (`auto`: into the parent's running turn, or as a new turn), so it
        survives a server crash; no rate limit, and it is journaled even while the host shuts
        down (the next start delivers it)."""
        if kind not in TOLD_AS_MESSAGES:
            raise ValueError(f"not a notice for a parent: {kind!r}")
        family = self._runtime.family
        parent, me = family.member(parent_id), family.member(child.session_id)
        if parent is None or me is None:
            return
        mail = Mail(
            message_id=f"notice_{secrets.token_hex(8)}",
            to_session_id=parent_id,
            to_name=member_name(parent, self.loaded()),
            from_session_id=child.session_id,
            from_name=member_name(me, self.loaded()),
            relationship="child",
            composed=now_iso(),
            mode="auto",
            body=text,
            notice=kind,
        )
        self.post(mail)

    def deliver_tick(
        self, target_id: str, body: str, mode: DeliveryMode, origin: dict[str, str]
    ) -> str:
        """A scheduled job's tick (core/scheduler.py) for `target_id`: journaled like a message
        (signed, so it survives a crash and is delivered exactly once), then delivered as one:
        `steer` enters a running turn at its next model call, `follow_up` waits for the run
        to end, an idle target starts a turn, a target not loaded is brought back. Its id."""
        member = self._runtime.family.member(target_id)
        mail = Mail(
            message_id=f"tick_{secrets.token_hex(8)}",
            to_session_id=target_id,
            to_name=member_name(member, self.loaded()) if member is not None else target_id,
            from_session_id=target_id,  # the job lives in the target's own folder
            from_name=origin["schedule_label"],
            relationship=None,
            composed=now_iso(),
            mode=mode,
            body=body,
            origin=origin,
        )
        self.post(mail)
        return mail.message_id

    def waiting(self, target_id: str, message_id: str) -> bool:
        """`message_id` is queued for `target_id` and not yet in its log."""
        return any(m.message_id == message_id for m in self._pending.get(target_id, ()))

    def post(self, mail: Mail) -> DeliveryStatus:
        """Journal `mail` (signed), then deliver it."""
        self._write(mail.to_session_id, self._runtime.signer.sign_object(SIGNED_FOR, mail.record()))
        return self._deliver(mail)

    def waiting_mail(self, target_id: str) -> list[Mail]:
        return list(self._pending.get(target_id, ()))

    def withdraw(self, target_id: str, mail: Mail, reason: str) -> None:
        """Close a waiting message before it is taken (it is never delivered)."""
        self._pending[target_id] = [m for m in self.waiting_mail(target_id) if m is not mail]
        self._write(target_id, {"type": "dropped", "message_id": mail.message_id, "reason": reason})

    def to_front(self, target_id: str, mail: Mail) -> None:
        others = [m for m in self.waiting_mail(target_id) if m is not mail]
        self._pending[target_id] = [mail, *others]

    # ------------------------------------------------------------ delivering

    def _deliver(self, mail: Mail) -> DeliveryStatus:
        """Hand `mail` to its target now if it is idle, else keep it waiting."""
        target_id = mail.to_session_id
        self._pending.setdefault(target_id, []).append(mail)
        agent = self._runtime.agents.get(target_id)
        if agent is None:
            self._in_background(self._load_and_deliver(target_id))
            return "queued"
        started = self._start_next_turn(agent)
        return "delivered" if started is mail else "queued"

    def _start_next_turn(self, agent: Agent) -> Mail | None:
        """If `agent` is idle and has messages waiting, start its next turn with the first one;
        the others waiting then enter that turn at its first model call. Returns the first."""
        waiting = self._pending.get(agent.session_id, [])
        first = next((m for m in waiting if not m.held), None)  # held: the user's, after a Stop
        if self._closed or first is None or agent.running:
            return None
        try:
            agent.start_turn(first.text, first.fields)
        except TurnInProgress:
            return None
        waiting.remove(first)
        for mail in waiting:
            if not mail.from_user:  # each of the user's follow-ups is a turn of its own
                mail.released = True
        return first

    async def _load_and_deliver(self, target_id: str) -> None:
        """Load the target, then deliver: mail waits out a passing failure, not a lasting one."""
        try:
            agent = await self._runtime.ensure_loaded(target_id)
        except FamilyError as exc:
            if exc.lasting:  # the sender is told, no stall
                reason = UNREADABLE_REASON if exc.status == SESSION_UNREADABLE else exc.message
                for mail in self._pending.pop(target_id, []):
                    self._undeliverable(mail, reason)
                return
            log.info("messages for %s stay queued: %s", target_id, exc.message)
            return
        except Exception:
            log.warning("loading %s for its messages failed", target_id, exc_info=True)
            return
        self._start_next_turn(agent)

    def inbox_for(self, session_id: str) -> Callable[[], list[InboxMessage]]:
        """The loop's `inbox` hook of one agent: the messages that enter its running turn."""

        def take() -> list[InboxMessage]:
            waiting = self._pending.get(session_id)
            if not waiting:
                return []
            taken = [m for m in waiting if m.enters_running_turn]
            if taken:
                self._pending[session_id] = [m for m in waiting if not m.enters_running_turn]
            return [InboxMessage(m.text, m.fields) for m in taken]

        return take

    def turn_ended(self, agent: Agent, stop_reason: str = "end_turn") -> None:
        """The loop's turn ended: follow-ups (and steers that came too late) start the next
        (the user's own wait for the user after a Stop: core/chat_queue.py)."""
        self.chat.turn_ended(agent, stop_reason)
        self._start_next_turn(agent)

    def agent_started(self, agent: Agent) -> None:
        """An agent was loaded: mark messages taken once their entry is in its log, and deliver
        what waited for it (on the next loop step, after its host finished setting it up)."""
        agent.events.add_listener(self._confirm_taken(agent))
        agent.events.add_listener(self.chat.listener(agent))
        self._in_background(self._deliver_soon(agent))

    async def _deliver_soon(self, agent: Agent) -> None:
        if self._runtime.agents.get(agent.session_id) is agent:
            self._start_next_turn(agent)

    def _confirm_taken(self, agent: Agent) -> Callable[[Event], None]:
        def listener(event: Event) -> None:
            message_id = event.get("message_id")
            if event["type"] in ("turn_started", "agent_message") and message_id:
                self._write(agent.session_id, {"type": "taken", "message_id": message_id})

        return listener

    # ------------------------------------------------------------ undeliverable

    def target_deleted(self, session_id: str) -> None:
        """`session_id` was deleted: each message still waiting for it tells its sender."""
        for mail in self._pending.pop(session_id, []):
            self._undeliverable(mail, "it was deleted")

    def _undeliverable(self, mail: Mail, reason: str) -> None:
        """Tell the sender once (a notice naming the message id), then close the message."""
        if mail.origin is not None or mail.relationship is None:  # a tick: no sender to tell
            self._close(mail, reason)
            return
        text = (
            f'Your message {mail.message_id} to {_INVERSE[mail.relationship]} "{mail.to_name}" '
            f'can never be delivered: {reason}. It said: "{shorten(mail.body, 120)}"'
        )
        sender = self._runtime.agents.get(mail.from_session_id)
        try:
            if sender is not None:
                if not _told(sender.session.entries, mail.message_id):
                    sender.notice("message_undeliverable", text)
            else:
                session = self._runtime.repository.load(mail.from_session_id)
                if not _told(session.entries, mail.message_id):
                    session.append("notice", kind="message_undeliverable", text=text)
        except SessionError as exc:
            log.warning(
                "cannot tell %s about message %s: %s", mail.from_session_id, mail.message_id, exc
            )
        self._close(mail, reason)

    def _close(self, mail: Mail, reason: str) -> None:
        """Record that `mail` will never arrive (a removed target's mailbox went with it)."""
        if self._file(mail.to_session_id).parent.is_dir():
            dropped = {"type": "dropped", "message_id": mail.message_id, "reason": reason}
            self._write(mail.to_session_id, dropped)

    # ------------------------------------------------------------ disk

    def _file(self, session_id: str) -> Path:
        return self._runtime.repository.directory(session_id) / MAILBOX_FILE

    def _write(self, session_id: str, record: dict[str, Any]) -> None:
        record.setdefault("ts", now_iso())
        line = json.dumps(record, ensure_ascii=False) + "\n"
        append_whole(self._file(session_id), line.encode())

    def recover(self) -> int:
        """At runtime start: re-queue every message that was queued and whose entry is not in
        its target's log (delivered once, never twice); a message whose target was deleted
        tells its sender. Returns how many messages wait now."""
        family = self._runtime.family
        family.refresh()
        for directory in self._runtime.repository.session_directories():  # never a link
            if os.path.lexists(directory / MAILBOX_FILE):
                self._recover_target(directory.name)
        return sum(len(v) for v in self._pending.values())

    def deliver_recovered(self) -> None:
        """Bring back, in the background, every agent that recovered messages wait for, and
        deliver them: a message queued before a restart reaches its target without anyone
        opening it. Needs the running event loop (the server calls it once it serves)."""
        for target_id, waiting in self._pending.items():
            if any(not m.held for m in waiting) and target_id not in self._runtime.agents:
                self._in_background(self._load_and_deliver(target_id))

    def untrusted_mail(self, session_id: str) -> list[Mail]:
        """Messages queued for `session_id` that do not carry this user's signature."""
        backlog = _read_backlog(self._file(session_id), self._runtime.signer)
        return [m for i, m in backlog.untrusted.items() if i not in backlog.closed]

    def trust_queued(self, session_id: str) -> int:
        """The user trusts `session_id`: its untrusted queued messages are signed and wait for
        delivery like any other (the caller delivers them). How many."""
        untrusted = self.untrusted_mail(session_id)
        for mail in untrusted:
            self._write(session_id, self._runtime.signer.sign_object(SIGNED_FOR, mail.record()))
        if untrusted:
            self._recover_target(session_id)
        return len(untrusted)

    def deliver_waiting(self, session_id: str) -> None:
        """Deliver what waits for `session_id` (loading it if needed), in the background."""
        if self._pending.get(session_id):
            agent = self._runtime.agents.get(session_id)
            if agent is None:
                self._in_background(self._load_and_deliver(session_id))
            else:
                self._start_next_turn(agent)

    def _recover_target(self, target_id: str) -> None:
        backlog = _read_backlog(self._file(target_id), self._runtime.signer)
        known = {m.message_id for m in self._pending.get(target_id, ())}
        waiting = [
            m for m in backlog.open if m.message_id not in known and m.to_session_id == target_id
        ]  # a record naming another target is not this mailbox's to deliver
        if not waiting:
            return
        delivered = self._delivered_ids(target_id)
        for mail in waiting:
            if mail.message_id in delivered:
                self._write(target_id, {"type": "taken", "message_id": mail.message_id})
            elif self._runtime.family.is_deleted(target_id):
                self._undeliverable(mail, "it was deleted")
            elif (member := self._runtime.family.member(target_id)) is None or member.refused:
                self._undeliverable(mail, member.why_refused if member else UNREADABLE_REASON)
            else:
                mail.held = mail.from_user  # the user's queue waits for the user after a restart
                self._pending.setdefault(target_id, []).append(mail)

    def _delivered_ids(self, target_id: str) -> set[str]:
        agent = self._runtime.agents.get(target_id)
        try:
            entries = (
                agent.session.entries
                if agent is not None
                else self._runtime.repository.read(target_id).entries
            )
        except SessionError:
            return set()
        return {
            e["message_id"]
            for e in entries
            if isinstance(e.get("message_id"), str)
            and e["type"] in ("user_message", "agent_message")
        }

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """The runtime shuts down: no new turns start; queued messages stay on disk."""
        self._closed = True


def _checked_mode(mode: object) -> DeliveryMode:
    if mode is None:
        return "auto"
    if mode not in MODES:
        raise FamilyError(
            400, f'mode must be "auto", "steer" or "follow_up", not {shorten(mode, 40)}'
        )
    return mode  # type: ignore[return-value]


def _told(entries: list[dict[str, Any]], message_id: str) -> bool:
    return any(
        e["type"] == "notice"
        and e.get("kind") == "message_undeliverable"
        and message_id in str(e.get("text", ""))
        for e in entries
    )


def _read_backlog(file: Path, signer: Signer) -> Backlog:
    backlog = Backlog()
    for record in _records(file):
        kind, message_id = record.get("type"), record.get("message_id")
        if not isinstance(message_id, str):
            continue
        if kind == "queued":
            mail = Mail.from_record(record)
            if mail is None:
                continue
            if signer.verify_object(SIGNED_FOR, record):
                backlog.queued[message_id] = mail
                backlog.untrusted.pop(message_id, None)
            elif message_id not in backlog.queued:
                backlog.untrusted[message_id] = mail
        elif kind in ("taken", "dropped"):
            backlog.closed.add(message_id)
    return backlog


def _records(file: Path) -> Iterator[dict[str, Any]]:
    """The file's records; a torn line (a crash mid-write) is skipped, and so is any other line
    that is not a JSON object. A file that cannot be read (a pipe, too large, ...) holds no
    messages: the server log names it and says why."""
    try:
        lines = read_jsonl(file, MAX_MAILBOX_BYTES)
    except UnreadableFile as exc:
        if not exc.missing:
            log.warning("mailbox ignored: %s", exc)
        return
    refused = [(n, r) for n, r in lines if isinstance(r, BadJson) and not r.torn]
    if refused:  # once per file: a hostile file must not flood the log
        number, first = refused[0]
        log.warning(
            "mailbox %s: %d line(s) skipped; line %d %s", file, len(refused), number, first.reason
        )
    for _, record in lines:
        if isinstance(record, dict):
            yield record
