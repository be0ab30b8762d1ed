"""Refine and trust from the host's REST routes (docs/harness.md, docs/trust.md): the part of
`AgentHost` that turns the panel's harness and trust requests into runtime calls."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from ..core.harness.refiner import RefineError, Refiner
from ..core.runtime import AgentRuntime
from ..core.sessions import SessionRepository
from ..core.settings import Settings
from ..core.text import shorten
from ..core.wire import TrustState
from .host_errors import HostError, attached, refuse_long_text


class HostHarness:
    runtime: AgentRuntime
    repository: SessionRepository
    settings: Settings

    def _refiner(self, session_id: str) -> Refiner:
        agent = attached(self.runtime.agents, session_id)
        refiner = self.runtime.refiners.get(agent.session_id)
        if refiner is None:
            raise HostError(409, f"session {shorten(session_id)} cannot refine its harness")
        return refiner

    def refine(self, session_id: str, instructions: str | None, global_: bool) -> dict[str, Any]:
        """`/refine`: plan a refinement in the background; it applies at a turn boundary."""
        refuse_long_text(instructions or "", self.settings, "refinement's instructions")
        with _refine_errors():
            return self._refiner(session_id).schedule(instructions, global_, trigger="user")

    def _known_session(self, session_id: str) -> None:
        if session_id not in self.runtime.agents and not self.repository.exists(session_id):
            raise HostError(404, f"no session {shorten(session_id, 80)}")

    async def untrusted(self, session_id: str) -> TrustState:
        """What in the session's folder (and its sub-agents') this user did not sign."""
        self._known_session(session_id)
        items = await asyncio.to_thread(self.runtime.untrusted, session_id)
        return {"trusted": not items, "untrusted": [item.as_dict() for item in items]}

    async def trust(self, session_id: str) -> TrustState:
        """Trust the session and its sub-agents as they are now, and load what was held back."""
        self._known_session(session_id)
        signed = await self.runtime.trust(session_id)
        return {"trusted": True, "untrusted": [], "signed": [i.as_dict() for i in signed]}

    async def refinements(self, session_id: str) -> dict[str, Any]:
        """The refinement records of the session's local and the global store, oldest first,
        and what could not be read (`RefinementList`)."""
        records, problems = await asyncio.to_thread(self._refiner(session_id).read_history)
        answer: dict[str, Any] = {"refinements": records}
        if problems:
            answer["problems"] = problems
        return answer

    async def rollback_refinement(self, session_id: str, refinement_id: str) -> dict[str, Any]:
        with _refine_errors():
            return await self._refiner(session_id).rollback(refinement_id)

    async def delete_harness_entry(
        self, session_id: str, kind: str, entry_id: str, global_: bool = False
    ) -> dict[str, Any]:
        """A delete from the panel: applied at the next turn boundary (at once when idle) and
        recorded as a refinement, so it can be rolled back."""
        with _refine_errors():
            return await self._refiner(session_id).delete(kind, entry_id, global_)


@contextlib.contextmanager
def _refine_errors() -> Iterator[None]:
    try:
        yield
    except RefineError as exc:
        raise HostError(exc.status, exc.message) from None
