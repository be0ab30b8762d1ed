"""Bridge operations behind the kernel's `rlm`: spawn, list and delete sub-agents, models, usage."""

from __future__ import annotations

from typing import Any

from prime_agent_kernel.operations import (
    DELETE_SUBAGENT,
    FIND_MODELS,
    LIST_SUBAGENTS,
    SPAWN_SUBAGENT,
    SUBAGENT_USAGE,
)

from .bridge import BridgeError
from .caller import CallerContext, Register
from .usage import AgentUsage, usage_report


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

    async def usage(ctx: CallerContext, payload: dict[str, Any]) -> AgentUsage:
        """The caller's tokens and cost, own and with its sub-agents, per agent of its tree."""
        return usage_report(ctx.runtime, ctx.agent.session_id)

    register(SPAWN_SUBAGENT, spawn)
    register(LIST_SUBAGENTS, list_subagents)
    register(DELETE_SUBAGENT, delete_subagent)
    register(FIND_MODELS, find_models)
    register(SUBAGENT_USAGE, usage)
