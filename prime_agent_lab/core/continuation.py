"""What may keep an agent working after it answered without a cell: the loop's `should_continue`.

The runtime supplies one `Continuers` per runtime as every agent's `should_continue` hook. Each
continuer (an active goal, an autonomous run's gates and budgets) is asked in the order they were
added; the first that returns True keeps the turn going, having put what the model reads next
into the agent's inbox (`Continuers.inject`). A continuer may wait before it answers (for
sub-agents still working, a user's cell): Stop cancels the wait with the turn. docs/autonomy.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .agent import Agent, TurnOutcome

Continuer = Callable[["Agent", "TurnOutcome"], Awaitable[bool]]
"""(agent, the answer that would end its turn) -> whether the turn goes on."""


class Continuers:
    """The continuers of one runtime, asked in order."""

    def __init__(self) -> None:
        self._chain: list[tuple[str, Continuer]] = []

    def add(self, name: str, continuer: Continuer) -> None:
        if any(existing == name for existing, _ in self._chain):
            raise ValueError(f"a continuer named {name!r} is already added")
        self._chain.append((name, continuer))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._chain]

    async def __call__(self, agent: Agent, outcome: TurnOutcome) -> bool:
        for _, continuer in self._chain:
            if await continuer(agent, outcome):
                return True
        return False
