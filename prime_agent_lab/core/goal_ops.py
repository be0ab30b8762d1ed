"""Bridge operations behind the kernel's `goal`: set, read and complete the calling agent's goal
(derived from the verified kernel, never from the payload; core/goals.py)."""

from __future__ import annotations

from typing import Any

from prime_agent_kernel.operations import COMPLETE_GOAL, CREATE_GOAL, GET_GOAL

from .caller import CallerContext, Register
from .goals import Goals


def register_goal_operations(register: Register, goals: Goals) -> None:
    """Offer `goal.create()`, `goal.get()` and `goal.complete()` through `register`
    (`AgentRuntime.operation`); a GoalError becomes a bridge error with its status."""

    async def create(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        goals.create(ctx.agent, payload.get("objective"), payload.get("token_budget"))
        return goals.report(ctx.agent.session_id)

    async def get(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        return goals.report(ctx.agent.session_id)

    async def complete(ctx: CallerContext, payload: dict[str, Any]) -> dict[str, Any]:
        return goals.complete(ctx.agent)

    register(CREATE_GOAL, create)
    register(GET_GOAL, get)
    register(COMPLETE_GOAL, complete)
