"""Bridge operations behind the kernel's `rlm`: spawn, list, delete sub-agents, list models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .bridge import BridgeError
from .family import FamilyError

if TYPE_CHECKING:
    from .runtime import AgentRuntime, CallerContext


def register_rlm_operations(runtime: AgentRuntime) -> None:
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

    runtime.operation("rlm.spawn", spawn)
    runtime.operation("rlm.list_subagents", list_subagents)
    runtime.operation("rlm.delete_subagent", delete_subagent)
    runtime.operation("rlm.find_models", find_models)


class _family_errors:
    """Family rule violations become bridge errors with their status and message."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, FamilyError):
            raise BridgeError(exc.status, exc.message) from None
