"""Bridge operations behind the kernel's `rlm`: spawn, list, delete sub-agents, list models."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .bridge import BridgeError
from .caller import CallerContext
from .family import FamilyError

Register = Callable[[str, Callable[[CallerContext, dict[str, Any]], Awaitable[Any]]], None]


def register_rlm_operations(register: Register) -> None:
    """Offer the `rlm` operations through `register(name, handler)` (`AgentRuntime.operation`)."""

    async def spawn(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        with _family_errors():
            return await ctx.runtime.spawn_child(
                ctx.agent, payload.get("prompt"), payload.get("name"), payload.get("model")
            )

    async def list_subagents(ctx: CallerContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
        return ctx.runtime.list_children(ctx.agent.session_id)

    async def delete_subagent(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        with _family_errors():
            return await ctx.runtime.delete_child(ctx.agent, payload.get("child"))

    async def find_models(ctx: CallerContext, payload: dict[str, Any]) -> list[str]:
        query = payload.get("query") or ""
        if not isinstance(query, str):
            raise BridgeError(400, "query must be a string")
        return [m for m in ctx.runtime.environment.models() if query.lower() in m.lower()]

    register("rlm.spawn", spawn)
    register("rlm.list_subagents", list_subagents)
    register("rlm.delete_subagent", delete_subagent)
    register("rlm.find_models", find_models)


@contextmanager
def _family_errors() -> Iterator[None]:
    """Family rule violations become bridge errors with their status and message."""
    try:
        yield
    except FamilyError as exc:
        raise BridgeError(exc.status, exc.message) from None
