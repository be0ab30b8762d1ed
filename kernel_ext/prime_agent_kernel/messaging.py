"""`agent_message` and `agent_observe`: messages to the agent's family, and a read-only look at it.

Every call goes to the host over the bridge. The host knows who is calling from this kernel's
signature; nothing here can name another sender.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

from .operations import DESCRIBE_AGENT, LIST_FAMILY, RECENT_MESSAGES, SEND_MESSAGE

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]

ROLES = ("parent", "sibling", "child")


class Record(SimpleNamespace):
    """A small answer from the host: attribute access (`receipt.delivery_status`) and `["key"]`."""

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def _records(answer: Any) -> Any:
    if isinstance(answer, list):
        return [_records(item) for item in answer]
    if isinstance(answer, dict):
        return Record(**answer)
    return answer


class AgentMessage:
    """Send messages to your parent, siblings and direct children.

    `await agent_message.send(text, receiver_role="parent")`,
    `await agent_message.send(text, receiver_role="child", receiver_name="part-a", mode="steer")`,
    `await agent_message.send("all", text)` (everyone in reach, one receipt each),
    `await agent_message.list_agents()`.
    """

    def __init__(self, call: Call) -> None:
        self._call = call

    async def send(
        self,
        message: str,
        receiver_role: str | None = None,
        receiver_name: str | None = None,
        mode: str = "auto",
    ) -> Any:
        """A receipt (`message_id`, `target`, `delivery_status` "delivered"/"queued", `time`);
        for a broadcast, a list with one receipt per family member (`error` when it failed).

        mode: "auto" (start a turn if the target is idle, else steer), "steer" (enter the
        target's running turn at its next model call), "follow_up" (wait until its run ends)."""
        if message == "all" and isinstance(receiver_role, str) and receiver_role not in ROLES:
            message, receiver_role = receiver_role, "all"  # send("all", text)
        payload = {
            "message": message,
            "receiver_role": receiver_role,
            "receiver_name": receiver_name,
            "mode": mode,
        }
        return _records(await self._call(SEND_MESSAGE, payload))

    async def list_agents(self) -> list[Record]:
        """Who you can reach: `relationship`, `name`, `session_id`, `notebook_path`, `status`
        (running, idle, inactive)."""
        return _records(await self._call(LIST_FAMILY, {}))  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return (
            "<agent_message: await .send(text, receiver_role='parent'|'sibling'|'child', "
            "receiver_name=None, mode='auto'|'steer'|'follow_up'); .send('all', text); "
            "await .list_agents()>"
        )


class AgentObserve:
    """A read-only look at a family member (same reach as messaging). `target`: its name, its
    session id, or "parent"."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def get_agent(self, target: str) -> Record:
        """Its status, task, model, turns, messages waiting and the start of its last answer."""
        return _records(await self._call(DESCRIBE_AGENT, {"target": target}))  # type: ignore[no-any-return]

    async def recent_messages(self, target: str, limit: int = 8) -> list[Record]:
        """Its newest `limit` messages (received, answered and sent), oldest first."""
        payload = {"target": target, "limit": limit}
        return _records(await self._call(RECENT_MESSAGES, payload))  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return "<agent_observe: await .get_agent(target); await .recent_messages(target, limit=8)>"
