"""The runtime's refiners: one `Refiner` per loaded agent, and the auto-refine review gate of
each root agent."""

from __future__ import annotations

from collections.abc import Callable

from ..agent_view import AgentView
from .auto_refine import AutoRefiner, AutoRefineSettings
from .refiner import Refiner
from .store import Harness


class Refiners:
    def __init__(
        self,
        harness_for: Callable[[str], Harness],
        auto_settings: Callable[[], AutoRefineSettings],
    ) -> None:
        self._harness_for = harness_for
        self._auto_settings = auto_settings
        self._refiners: dict[str, Refiner] = {}
        self._auto: dict[str, AutoRefiner] = {}

    def agent_started(self, agent: AgentView, root: bool) -> Refiner:
        """`agent`'s refiner; a root agent also gets the auto-refine review gate."""
        self._auto.pop(agent.session_id, None)
        refiner = Refiner(agent, self._harness_for(agent.session_id))
        self._refiners[agent.session_id] = refiner
        if root:
            self._auto[agent.session_id] = AutoRefiner(refiner, self._auto_settings)
        return refiner

    def get(self, session_id: str) -> Refiner | None:
        return self._refiners.get(session_id)

    def auto(self, session_id: str) -> AutoRefiner | None:
        return self._auto.get(session_id)

    async def at_boundary(self, session_id: str) -> None:
        """Before a model call: apply what is ready (the loop's `before_model_call` hook)."""
        refiner = self._refiners.get(session_id)
        if refiner is not None:
            await refiner.at_boundary()

    def turn_ended(self, session_id: str) -> None:
        refiner = self._refiners.get(session_id)
        if refiner is not None:
            refiner.turn_ended()

    async def agent_gone(self, session_id: str) -> None:
        auto = self._auto.pop(session_id, None)
        if auto is not None:
            auto.close()
        refiner = self._refiners.pop(session_id, None)
        if refiner is not None:
            await refiner.close()

    def pending(self) -> bool:
        """A review, refinement, rollback or delete is still to be decided or applied."""
        reviewing = any(auto.reviewing for auto in self._auto.values())
        return reviewing or any(refiner.pending() for refiner in self._refiners.values())

    async def finish(self) -> None:
        """Finish every review and refinement asked for (a headless run ending)."""
        for auto in list(self._auto.values()):
            await auto.finish()
        for refiner in list(self._refiners.values()):
            await refiner.finish()

    async def close(self) -> None:
        for session_id in list(self._refiners):
            await self.agent_gone(session_id)
