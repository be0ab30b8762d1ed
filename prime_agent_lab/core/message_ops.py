"""Bridge operations of `agent_message` and `agent_observe` (the kernel's messaging API).

The caller is the agent whose kernel signed the request (`CallerContext`); a payload never names
the sender. Observing is read-only and has the same reach as messaging.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prime_agent_kernel.operations import (
    DESCRIBE_AGENT,
    LIST_FAMILY,
    RECENT_MESSAGES,
    SEND_MESSAGE,
)

from .bridge import payload_number
from .caller import CallerContext, Operation, Register, TreeRuntime
from .family import FamilyError
from .reach import Relative, resolve_relative
from .sessions import SessionError, SessionLog
from .text import shorten

RECENT_TYPES = ("user_message", "agent_message", "assistant_message", "message_sent")
MAX_RECENT = 100
PREVIEW_CHARS = 500


def register_message_operations(register: Register) -> None:
    """Offer the `agent_message` and `agent_observe` operations (see `caller.Register`)."""
    ops: dict[str, Operation] = {
        SEND_MESSAGE: send,
        LIST_FAMILY: list_agents,
        DESCRIBE_AGENT: get_agent,
        RECENT_MESSAGES: recent_messages,
    }
    for name, handler in ops.items():
        register(name, handler)


async def send(context: CallerContext, payload: dict[str, Any]) -> Any:
    """`{message, receiver_role, receiver_name?, mode?}`; `receiver_role: "all"` broadcasts.
    Any `from`/`sender` key is ignored: the sender is the caller."""
    mailbox = context.runtime.mailbox
    role, mode = payload.get("receiver_role"), payload.get("mode", "auto")
    if role == "all":
        receipts = mailbox.broadcast(context.agent, payload.get("message"), mode)
        return [r.as_dict() for r in receipts]
    receipt = mailbox.send(
        context.agent, payload.get("message"), role, payload.get("receiver_name"), mode
    )
    return receipt.as_dict()


async def list_agents(context: CallerContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The caller's family: relationship, name, session id, notebook and status."""
    return [_summary(context.runtime, r) for r in context.runtime.mailbox.relatives(context.agent)]


async def get_agent(context: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
    """One family member's state: status, task, model, turns, messages waiting, last answer."""
    runtime = context.runtime
    relative = _target(context, payload)
    session = await session_of(runtime, relative.member.session_id)
    last = session.last_of("turn_end")
    return {
        **_summary(runtime, relative),
        "task": relative.member.task,
        "model": relative.member.model,
        "depth": relative.member.depth,
        "turns": session.turns(),
        "pending_messages": runtime.mailbox.pending(relative.member.session_id),
        "last_answer": shorten(str(last.get("final_text", "")), PREVIEW_CHARS) if last else "",
        "last_stop_reason": last.get("stop_reason") if last else None,
        "updated": session.updated(),
    }


async def recent_messages(context: CallerContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The newest `limit` messages of a family member's transcript (its user and agent
    messages, its answers and the messages it sent), oldest first."""
    limit = int(payload_number(payload, "limit", default=8, minimum=1, maximum=MAX_RECENT))
    relative = _target(context, payload)
    session = await session_of(context.runtime, relative.member.session_id)
    found = [_message(e) for e in session.path() if _is_message(e)]
    return found[-limit:]


def _target(context: CallerContext, payload: dict[str, Any]) -> Relative:
    runtime = context.runtime
    return resolve_relative(
        runtime.family, context.agent.session_id, runtime.mailbox.loaded(), payload.get("target")
    )


def _summary(runtime: TreeRuntime, relative: Relative) -> dict[str, Any]:
    agent = runtime.agents.get(relative.member.session_id)
    status = "inactive" if agent is None else ("running" if agent.running else "idle")
    return {
        "relationship": relative.relationship,
        "name": relative.name,
        "session_id": relative.member.session_id,
        "notebook_path": agent.session.notebook_path if agent else relative.member.notebook_path,
        "status": status,
    }


async def session_of(runtime: TreeRuntime, session_id: str) -> SessionLog:
    agent = runtime.agents.get(session_id)
    if agent is not None:
        return agent.session
    try:
        return await asyncio.to_thread(runtime.repository.read, session_id)
    except SessionError as exc:
        raise FamilyError(404, str(exc)) from None


def _is_message(entry: dict[str, Any]) -> bool:
    if entry["type"] == "assistant_message":
        return bool(entry.get("text"))
    return entry["type"] in RECENT_TYPES


def _message(entry: dict[str, Any]) -> dict[str, Any]:
    keep = ("turn", "from_name", "relationship", "to_name", "message_id", "delivery_status")
    return {
        "type": entry["type"],
        "ts": entry.get("ts"),
        "text": str(entry.get("text", "")),
        **{k: entry[k] for k in keep if k in entry},
    }
