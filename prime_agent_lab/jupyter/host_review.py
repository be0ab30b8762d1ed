"""Review and revert a turn on the server (docs/pairing.md, section 5): the part of `AgentHost`
behind `GET .../turns/<turn>` and `POST .../turns/<turn>/revert`. What a turn wrote and which
snapshot shows the kernel as it began are the core's (core/turn_review.py); this module reads the
live notebook, asks the kernel, removes cells and records the `turn_reverted` entry."""

from __future__ import annotations

import logging
from typing import Any

from ..core.agent import Agent
from ..core.ports import NotebookUnavailable
from ..core.runtime import AgentRuntime
from ..core.snapshots import SnapshotFailed
from ..core.text import shorten
from ..core.turn_review import (
    KEPT_BY_YOU,
    NOT_THIS_AGENTS,
    KernelPlan,
    TurnNotFound,
    TurnRecord,
    kept_reason,
    kernel_count,
    plan_kernel,
    read_turn,
    restore_before_turn,
    revert_answer,
)
from ..core.wire import KeptCell, TurnRevert, TurnReview
from .host_errors import HostError, attached

log = logging.getLogger(__name__)

RUNNING = "the agent is running a turn; stop it first (or wait until it ends)"


class HostReview:
    runtime: AgentRuntime

    def _turn(self, agent: Agent, turn: int) -> TurnRecord:
        try:
            return read_turn(agent.session, turn)
        except TurnNotFound:
            raise HostError(404, f"session {agent.session_id} has no turn {turn}") from None

    async def turn_review(self, session_id: str, turn: int) -> TurnReview:
        """The cells the turn wrote (`in_notebook` from the live notebook) and whether the
        kernel can go back to how it was as the turn began; 404 for an unknown turn."""
        agent = attached(self.runtime.agents, session_id)
        record = self._turn(agent, turn)
        present = await _notebook_cells(agent)
        cells = [{**c, "in_notebook": c["cell_id"] in present} for c in record.cells]
        if agent.running:
            plan = KernelPlan(None, RUNNING)
        elif record.reverted:
            plan = KernelPlan(None, "this turn was reverted already")
        else:
            plan = await self._plan(agent, record)
        return {
            "session_id": session_id,
            "turn": turn,
            "cells": cells,  # type: ignore[typeddict-item]
            "kernel": plan.wire(),
            "reverted": record.reverted,
        }

    async def _plan(self, agent: Agent, record: TurnRecord) -> KernelPlan:
        count = await kernel_count(agent.kernel) if record.ran() else None
        return plan_kernel(record, agent.session.directory, self.runtime.signer, count)

    async def revert_turn(
        self, session_id: str, turn: int, cells_removed: list[str] | None, restore_kernel: bool
    ) -> TurnRevert:
        """Remove the turn's cells (the panel removed `cells_removed` itself; for the whole turn
        or without it the server removes the rest it may, see `_revert`) and, for the whole turn,
        bring the kernel back
        to the snapshot taken before it when one may be used. 409 while a turn runs or for a
        turn already reverted whole, 400 for a cell id not of the turn, 404 for an unknown turn."""
        agent = attached(self.runtime.agents, session_id)
        if agent.running:
            raise HostError(409, RUNNING)
        reverting = _reverting(self)
        if session_id in reverting:
            raise HostError(409, "a revert of this session is under way")
        record = self._turn(agent, turn)
        if record.reverted:
            raise HostError(409, f"turn {turn} was reverted already")
        known = {c["cell_id"] for c in record.cells}
        if cells_removed is not None:
            cells_removed = list(dict.fromkeys(cells_removed))  # a cell is removed once
        foreign = [i for i in cells_removed or [] if i not in known]
        if foreign:
            shown = ", ".join(shorten(i, 40) for i in foreign[:5])
            raise HostError(400, f"not a cell of turn {turn}: {shown}")
        if cells_removed == [] and not restore_kernel:
            raise HostError(400, "name the cells removed (cells_removed) or restore the kernel")
        reverting.add(session_id)
        try:
            return await self._revert(agent, record, cells_removed, restore_kernel)
        finally:
            reverting.discard(session_id)

    async def _revert(
        self,
        agent: Agent,
        record: TurnRecord,
        cells_removed: list[str] | None,
        restore_kernel: bool,
    ) -> TurnRevert:
        """The cells named in `cells_removed` the panel deleted itself (after asking, for one
        the user changed); those still in the live document (a delete not synced yet) go here,
        unless they are not this session's agent cells of the turn. The panel's choice holds: a
        cell of the turn it did not name stays (the user's edit of it may not have reached this
        document yet) and is named as kept. Without `cells_removed` (REST) every cell of the
        turn still in the notebook goes, unless the user changed it or it is not this agent's:
        those are kept and named."""
        named = set(cells_removed or [])
        live = await _notebook_cells_by_id(agent)
        to_remove: list[str] = []
        kept: list[KeptCell] = []
        for cell in record.cells:
            cell_id = cell["cell_id"]
            found = live.get(cell_id)
            if found is None:
                continue
            why = kept_reason(found, agent.session_id, record.turn, cell["code"])
            if cells_removed is not None and cell_id not in named:
                if restore_kernel:  # a whole turn: say what stays
                    reason = why or KEPT_BY_YOU
                    kept.append(
                        {"cell_id": cell_id, "first_line": cell["first_line"], "reason": reason}
                    )
                continue
            if why == NOT_THIS_AGENTS or (why is not None and cell_id not in named):
                kept.append({"cell_id": cell_id, "first_line": cell["first_line"], "reason": why})
            else:
                to_remove.append(cell_id)
        if restore_kernel and not kept:  # the whole turn goes: its narration (docs/teaching.md)
            to_remove += _narration_of(live, agent.session_id, record.turn)
        try:
            gone = set(await agent.notebook.remove_cells(to_remove)) if to_remove else set()  # type: ignore[attr-defined]
        except NotebookUnavailable as exc:
            raise HostError(409, str(exc)) from None
        kept_ids = {k["cell_id"] for k in kept}
        removed = [
            c["cell_id"]
            for c in record.cells
            if c["cell_id"] in gone or (c["cell_id"] in named and c["cell_id"] not in kept_ids)
        ]
        if cells_removed is None and not removed and not restore_kernel:
            raise HostError(409, f"none of the cells of turn {record.turn} is in the notebook")
        kernel, reason, report = "untouched", None, {}
        if restore_kernel:
            kernel, reason, report = await self._restore_kernel(agent, record)
        answer = revert_answer(record, removed, restore_kernel, kernel, report, reason, kept)
        agent.session.append("turn_reverted", **answer)
        agent.events.emit("turn_reverted", **answer)
        return answer

    async def _restore_kernel(
        self, agent: Agent, record: TurnRecord
    ) -> tuple[str, str | None, dict[str, Any]]:
        plan = await self._plan(agent, record)
        if plan.untouched:
            return "untouched", plan.reason, {}
        if plan.snapshot is None:
            return "not_restored", plan.reason, {}
        keeper = self.runtime.snapshots
        try:  # a snapshot due or under way (the turn's end) first, so no file moves under us
            await keeper.save(agent)
        except Exception as exc:
            log.info("the snapshot before reverting %s failed: %s", agent.session_id, exc)
        count = await kernel_count(agent.kernel)
        plan = plan_kernel(record, agent.session.directory, self.runtime.signer, count)
        if plan.snapshot is None:
            return "not_restored", plan.reason, {}
        try:
            report = await restore_before_turn(
                agent.kernel, agent.session.directory, plan.snapshot, keeper.transfers
            )
        except Exception as exc:  # the kernel died or timed out meanwhile, a disk error, ...
            log.warning("reverting %s: the restore failed", agent.session_id, exc_info=True)
            why = exc if isinstance(exc, SnapshotFailed) else f"{type(exc).__name__}: {exc}"
            return "not_restored", f"the snapshot could not be loaded: {why}", {}
        if report.get("refused"):
            return "not_restored", f"the snapshot could not be loaded: {report['refused']}", {}
        self.runtime.spawn(_snapshot_quietly(self.runtime, agent))  # the reverted kernel
        return "restored", None, report


async def _notebook_cells(agent: Agent) -> set[str]:
    """The cell ids in the agent's live notebook (none when it cannot be read)."""
    return set(await _notebook_cells_by_id(agent))


async def _notebook_cells_by_id(agent: Agent) -> dict[str, dict[str, Any]]:
    """The cells of the agent's live notebook by id (none when it cannot be read)."""
    read = getattr(agent.notebook, "cells", None)
    if read is None:
        return {}
    try:
        return {str(c.get("id")): c for c in await read()}
    except NotebookUnavailable:
        return {}


def _narration_of(live: dict[str, dict[str, Any]], session_id: str, turn: int) -> list[str]:
    """The markdown cells `narrate_cells` wrote for this turn (its message and its answer)."""
    found = []
    for cell_id, cell in live.items():
        mark = (cell.get("metadata") or {}).get("prime_agent")
        if (
            isinstance(mark, dict)
            and mark.get("role") == "narration"
            and mark.get("session_id") == session_id
            and mark.get("turn") == turn
        ):
            found.append(cell_id)
    return found


def _reverting(host: Any) -> set[str]:
    """The sessions a revert runs on now (one at a time per session)."""
    found: set[str] | None = getattr(host, "_reverting_sessions", None)
    if found is None:
        found = host._reverting_sessions = set()
    return found


async def _snapshot_quietly(runtime: AgentRuntime, agent: Agent) -> None:
    try:
        await runtime.snapshots.save(agent)
    except Exception as exc:
        log.warning("the snapshot after reverting %s failed: %s", agent.session_id, exc)
