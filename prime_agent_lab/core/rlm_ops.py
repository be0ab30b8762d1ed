"""Bridge operations behind the kernel's `rlm`: spawn, list, delete sub-agents, list models."""

from __future__ import annotations

from typing import Any

from prime_agent_kernel.operations import (
    DELETE_SUBAGENT,
    FIND_MODELS,
    LIST_SUBAGENTS,
    SPAWN_SUBAGENT,
)

from .bridge import BridgeError
from .caller import CallerContext, Register


def register_rlm_operations(register: Register) -> None:
    """Offer the `rlm` operations through `register(name, handler)` (`AgentRuntime.operation`)."""

    async def spawn(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        return await ctx.runtime.spawn_child(
            ctx.agent, payload.get("prompt"), payload.get("name"), payload.get("model")
        )

    async def list_subagents(ctx: CallerContext, payload: dict[str, Any]) -> list[dict[str, Any]]:
        return ctx.runtime.list_children(ctx.agent.session_id)

    async def delete_subagent(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        return await ctx.runtime.delete_child(ctx.agent, payload.get("child"))

    async def find_models(ctx: CallerContext, payload: dict[str, Any]) -> list[str]:
        query = payload.get("query") or ""
        if not isinstance(query, str):
            raise BridgeError(400, "query must be a string")
        return [m for m in ctx.runtime.environment.models() if query.lower() in m.lower()]

    register(SPAWN_SUBAGENT, spawn)
    register(LIST_SUBAGENTS, list_subagents)
    register(DELETE_SUBAGENT, delete_subagent)
    register(FIND_MODELS, find_models)
