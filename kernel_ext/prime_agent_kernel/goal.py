"""`goal`: an objective the agent keeps working on until it is achieved (docs/autonomy.md).

await goal.create("reproduce figure 3 of the paper", token_budget=200_000)
await goal.get()        # {goal, remaining_tokens, completion_budget_report}
await goal.complete()   # only this completes a goal; saying "done" does not

While the goal is active, each answer without a cell is followed by a continuation that restates
the objective and the budget left. Pause, resume and clear are the user's (`/goal` in the chat).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .operations import COMPLETE_GOAL, CREATE_GOAL, GET_GOAL

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


class Goal:
    """Bound as `goal` in an agent's kernel."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def create(self, objective: str, token_budget: int | None = None) -> dict[str, Any]:
        """Set the goal (at most 4,000 characters; `token_budget`: input + output tokens,
        sub-agents' included). Refused while a goal is active, paused or budget-limited; a
        complete or failed goal is replaced. Returns what `get()` returns."""
        result: dict[str, Any] = await self._call(
            CREATE_GOAL, {"objective": objective, "token_budget": token_budget}
        )
        return result

    async def get(self) -> dict[str, Any]:
        """`{goal: None or {goal_id, objective, status, token_budget, tokens_used,
        time_used_seconds, continuations, created_at, updated_at, reason}, remaining_tokens,
        completion_budget_report}`."""
        result: dict[str, Any] = await self._call(GET_GOAL, {})
        return result

    async def complete(self) -> dict[str, Any]:
        """Mark the goal achieved, once every requirement is verified: `{goal,
        completion_budget_report}` ("Goal achieved. Used N of M tokens in T")."""
        result: dict[str, Any] = await self._call(COMPLETE_GOAL, {})
        return result

    def __repr__(self) -> str:
        return (
            "goal: await goal.create(objective, token_budget=None), await goal.get(), "
            "await goal.complete()"
        )
