"""Bridge operations that every host (server or CLI) offers to its agent kernels."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from prime_agent_kernel.operations import PING, READ_HISTORY

from .bridge import BridgeService, Caller, payload_number
from .sessions import SessionLog
from .transcript import history_records, history_since


class HasSession(Protocol):
    @property
    def session(self) -> SessionLog: ...


def register_session_operations(
    bridge: BridgeService, context_for: Callable[[Caller], HasSession]
) -> None:
    """The caller's own session record (`READ_HISTORY`) and a health and latency probe (`PING`)."""

    async def history_get(caller: Caller, payload: dict[str, Any]) -> Any:
        """The whole record, or with `since` (an entry id the kernel already holds, or None)
        `{"base": since, "records": [...]}`: only what follows it when it is still on the
        path, else everything with `base` None (a branch moved the leaf)."""
        session = context_for(caller).session
        if "since" not in payload:
            return history_records(session)
        return history_since(session, payload.get("since"))

    async def ping(caller: Caller, payload: dict[str, Any]) -> dict[str, Any]:
        delay = payload_number(payload, "delay", default=0.0, minimum=0.0, maximum=60.0)
        if delay:
            await asyncio.sleep(delay)
        return {
            "kernel_id": caller.kernel_id,
            "session_id": caller.session_id,
            "echo": payload.get("echo"),
        }

    bridge.register(READ_HISTORY, history_get)
    bridge.register(PING, ping)
