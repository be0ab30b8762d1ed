"""Branch, fork and clone a session from the host's REST routes (docs/branching.md): the part of
`AgentHost` that reads and marks the live notebook of a branched session."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from ..core import branching
from ..core.agent import Agent
from ..core.ports import NotebookUnavailable
from ..core.runtime import AgentRuntime
from ..core.sessions import SessionError, SessionLog, SessionRepository
from ..core.steps import session_steps
from ..core.wire import SessionSteps
from .host_errors import HostError
from .live_notebook import LiveNotebook
from .server_notebooks import ServerNotebooks

log = logging.getLogger(__name__)


class HostBranches:
    runtime: AgentRuntime
    repository: SessionRepository
    notebooks: ServerNotebooks

    async def session_tree(self, session_id: str) -> dict[str, Any]:
        session, _ = await self._branchable(session_id)
        return branching.tree(session)

    async def session_steps(self, session_id: str) -> SessionSteps:
        """The step-through of a session, loaded or only on disk (docs/teaching.md)."""
        session, agent = await self._branchable(session_id)
        family = self.runtime.family
        children = {
            m.session_id for m in await asyncio.to_thread(family.children, session_id, True)
        }
        if agent is not None:  # its log changes on the loop: read it there
            return session_steps(session, children)
        return await asyncio.to_thread(session_steps, session, children)  # only this call holds it

    async def move_leaf(self, session_id: str, entry_id: object) -> dict[str, Any]:
        """Branch to an earlier point; the notebook's cells of other branches are marked."""
        session, agent = await self._branchable(session_id)
        running = agent is not None and agent.running
        with _branch_errors():
            move = branching.move_leaf(session, entry_id, running=running)
        marked = await self._mark_branches(session, agent)
        out: dict[str, Any] = {"leaf_id": move.leaf_id, "marked_cells": marked}
        if move.text is not None:
            out["text"] = move.text
        if agent is not None:
            # A page loaded later must not replay the abandoned turns' events over the transcript.
            agent.events.forget_replay()
            agent.events.emit("branch_moved", **out)
        return out

    async def fork(self, session_id: str, entry_id: object) -> dict[str, Any]:
        session, agent = await self._branchable(session_id)
        with _branch_errors():
            plan = branching.plan_fork(session, entry_id)
        return await self._write_copy(plan, agent)

    async def clone(self, session_id: str) -> dict[str, Any]:
        session, agent = await self._branchable(session_id)
        if agent is not None and agent.running:
            raise HostError(409, "the agent is working on a turn; stop it or wait before cloning")
        with _branch_errors():
            plan = branching.plan_clone(session)
        return await self._write_copy(plan, agent)

    async def _branchable(self, session_id: str) -> tuple[SessionLog, Agent | None]:
        """The attached agent's own log (it holds the leaf), else the log read from disk."""
        agent = self.runtime.agents.get(session_id)
        if agent is not None:
            return agent.session, agent
        try:
            return await asyncio.to_thread(self.repository.read, session_id), None
        except SessionError as exc:
            raise HostError(404, str(exc)) from None

    def _notebook_of(self, session: SessionLog, agent: Agent | None) -> LiveNotebook:
        if agent is not None and isinstance(agent.notebook, LiveNotebook):
            return agent.notebook
        return self.notebooks.live(session.notebook_path)

    async def _mark_branches(self, session: SessionLog, agent: Agent | None) -> int:
        on, off = branching.cells_by_branch(session)
        try:
            return await self._notebook_of(session, agent).mark_branches(
                session.session_id, on, off
            )
        except NotebookUnavailable as exc:  # the record moved; the notebook is gone
            log.warning("cells of session %s not marked: %s", session.session_id, exc)
            return 0

    async def _write_copy(self, plan: branching.CopyPlan, agent: Agent | None) -> dict[str, Any]:
        try:
            cells = await self._notebook_of(plan.source, agent).cells()
        except NotebookUnavailable:
            cells = []
        return await branching.write_copy(self.repository, plan, cells, self.notebooks.create)


@contextlib.contextmanager
def _branch_errors() -> Iterator[None]:
    try:
        yield
    except branching.BranchError as exc:
        raise HostError(exc.status, exc.message) from None
