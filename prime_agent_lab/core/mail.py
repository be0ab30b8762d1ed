"""One message on its way between two agents (`Mail`, its journal record), what its sender gets
back (`Receipt`), and the mailbox's bookkeeping types: a sender's rate bucket and what one
mailbox file holds."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .entry_types import TICK_FIELDS, TOLD_AS_MESSAGES
from .reach import ROLES
from .sessions import now_iso
from .wire import DeliveryMode, Relationship

MODES: tuple[DeliveryMode, ...] = get_args(DeliveryMode)
DeliveryStatus = Literal["delivered", "queued", "failed"]


@dataclass
class Mail:
    """One message on its way: everything the receiver will read, and whom it was for."""

    message_id: str
    to_session_id: str
    to_name: str
    from_session_id: str
    from_name: str
    relationship: Relationship | None  # the sender, seen from the receiver (None: a tick)
    composed: str
    mode: DeliveryMode
    body: str
    notice: str | None = None  # a notice kind: the runtime tells a parent about its child
    released: bool = False  # a follow-up whose wait is over: its target's run ended
    origin: dict[str, str] | None = None  # a scheduled job's tick (`TICK_FIELDS`), no sender
    from_user: bool = False  # the user's own message from the chat (core/chat_queue.py)
    held: bool = False  # the user's message waits for the user: a Stop or a restart paused it

    @property
    def text(self) -> str:
        """What the receiver's model reads."""
        if self.from_user:
            return self.body
        if self.notice is not None:
            return f"[notice] {self.body}"
        if self.origin is not None:
            return f"{tick_header(self.origin)}\n{self.body}"
        header = (
            f'[message from {self.relationship} "{self.from_name}", written {self.composed}, '
            f"id {self.message_id}]"
        )
        return f"{header}\n{self.body}"

    @property
    def fields(self) -> dict[str, Any]:
        """The fields of the receiver's entry and event (`TurnStartedEvent`,
        `AgentMessageEvent` in wire.py)."""
        if self.from_user:
            return {
                "message_id": self.message_id,
                "composed": self.composed,
                "mode": self.mode,
                "from_user": True,
            }
        if self.origin is not None:
            return {
                "message_id": self.message_id,
                "composed": self.composed,
                "mode": self.mode,
                **self.origin,
            }
        return {
            "message_id": self.message_id,
            "from_session_id": self.from_session_id,
            "from_name": self.from_name,
            "relationship": self.relationship,
            "composed": self.composed,
            "mode": self.mode,
            **({"notice": self.notice} if self.notice is not None else {}),
        }

    @property
    def enters_running_turn(self) -> bool:
        """Taken at the target's next model-call boundary (else: when its run ends); a held
        message is taken by nothing until the user sends again."""
        return not self.held and (self.mode != "follow_up" or self.released)

    def record(self) -> dict[str, Any]:
        return {
            "type": "queued",
            "ts": now_iso(),
            "message_id": self.message_id,
            "to_session_id": self.to_session_id,
            "to_name": self.to_name,
            "from_session_id": self.from_session_id,
            "from_name": self.from_name,
            "relationship": self.relationship,
            "composed": self.composed,
            "mode": self.mode,
            "body": self.body,
            **({"notice": self.notice} if self.notice is not None else {}),
            **({"origin": self.origin} if self.origin is not None else {}),
            **({"from_user": True} if self.from_user else {}),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Mail | None:
        origin = record.get("origin")
        try:
            mail = cls(
                **{k: record[k] for k in _MAIL_FIELDS},
                notice=record.get("notice"),
                origin=origin,
                from_user=record.get("from_user") is True,
            )
        except (KeyError, TypeError):
            return None
        text_fields = [getattr(mail, k) for k in _MAIL_FIELDS if k != "relationship"]
        if not all(isinstance(v, str) for v in text_fields):
            return None
        if mail.notice is not None and mail.notice not in TOLD_AS_MESSAGES:
            return None
        if mail.from_user:
            if mail.relationship is not None or origin is not None or mail.notice is not None:
                return None
        elif origin is not None:
            if not isinstance(origin, dict) or set(origin) != set(TICK_FIELDS):
                return None
            if not all(isinstance(v, str) for v in origin.values()):
                return None
        elif mail.relationship not in ROLES:
            return None
        if mail.mode not in MODES:
            return None
        return mail


_MAIL_FIELDS = (
    "message_id",
    "to_session_id",
    "to_name",
    "from_session_id",
    "from_name",
    "relationship",
    "composed",
    "mode",
    "body",
)


_WHOSE = {"user": "the user's", "agent": "yours", "cli": "set from the terminal"}


def tick_header(origin: dict[str, str]) -> str:
    """The line the model reads before a tick's instruction. The label is quoted as a JSON
    string, so no label (the agent's own text) can close the quote and fake whose job it is."""
    what = "scheduled message" if origin["schedule_kind"] in ("in", "at") else "heartbeat"
    whose = _WHOSE.get(origin["schedule_owner"], origin["schedule_owner"])
    label = json.dumps(origin["schedule_label"], ensure_ascii=False)
    return f"[{what} {label} ({whose}, id {origin['schedule_id']}), due {origin['scheduled_for']}]"


@dataclass(frozen=True)
class Receipt:
    """What the sender gets back: its message's id, whom it went to and how far it got."""

    message_id: str | None
    target: str
    target_session_id: str
    relationship: Relationship  # the target, seen from the sender
    mode: DeliveryMode
    delivery_status: DeliveryStatus
    time: str
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "target": self.target,
            "target_session_id": self.target_session_id,
            "relationship": self.relationship,
            "mode": self.mode,
            "delivery_status": self.delivery_status,
            "time": self.time,
            "error": self.error,
        }


@dataclass
class Bucket:
    """A token bucket: `burst` sends at once, refilled at `rate` per second."""

    tokens: float
    updated: float

    def take(self, now: float, rate: float, burst: int) -> bool:
        self.tokens = min(float(burst), self.tokens + (now - self.updated) * rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def refund(self, burst: int) -> None:
        self.tokens = min(float(burst), self.tokens + 1.0)

    def wait(self, rate: float) -> float:
        return max(0.0, (1.0 - self.tokens) / rate) if rate > 0 else float("inf")


@dataclass
class Backlog:
    """What one mailbox file holds: messages in order, and which are closed (taken, dropped)."""

    queued: dict[str, Mail] = field(default_factory=dict)
    closed: set[str] = field(default_factory=set)
    untrusted: dict[str, Mail] = field(default_factory=dict)  # queued without our signature

    @property
    def open(self) -> list[Mail]:
        return [m for i, m in self.queued.items() if i not in self.closed]
