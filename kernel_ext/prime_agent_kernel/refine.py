"""`refine`: refinements of the agent's continual harness (docs/harness.md).

await refine.run("promote the retry pattern to a skill")   # plans in the background
await refine.status()                                      # pending, in_flight
records = await refine.history()                           # records[-1].edits[0].before
await refine.rollback(records[-1].id)                      # a new recorded refinement

Every call goes to the host over the bridge; the host knows the calling agent from this
kernel's signature.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .messaging import Record
from .operations import (
    REFINEMENT_HISTORY,
    REFINEMENT_STATUS,
    ROLLBACK_REFINEMENT,
    SCHEDULE_REFINEMENT,
)

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


def refinement_record(data: dict[str, Any]) -> Record:
    """A record with attribute access, its edits too (`before`/`after` stay entry dicts)."""
    edits = [Record(**edit) if isinstance(edit, dict) else edit for edit in data.get("edits", [])]
    return Record(**{**data, "edits": edits})


class Refine:
    """Bound as `refine` in an agent's kernel."""

    def __init__(self, call: Call) -> None:
        self._call = call

    async def run(self, instructions: str | None = None, global_: bool = False) -> Record:
        """Plan a refinement in the background (one model call over the harness, its history
        and your recent trajectory); it is applied at the next turn boundary, and you read what
        changed at your next model call. `{scheduled, note}` or `{scheduled: False, reason}`.
        `global_=True` refines the store every session shares."""
        if instructions is not None and not isinstance(instructions, str):
            raise TypeError("instructions must be a string or None")
        if not isinstance(global_, bool):  # bool("no") would refine the shared store
            raise TypeError("global_ must be True or False")
        payload = {"instructions": instructions, "global": global_}
        return Record(**await self._call(SCHEDULE_REFINEMENT, payload))

    async def status(self) -> Record:
        """`pending` (requests not applied yet), `in_flight` (a planner call runs now),
        `waiting_to_apply`, `queued_rollbacks`."""
        return Record(**await self._call(REFINEMENT_STATUS, {}))

    async def history(self) -> list[Record]:
        """Every refinement of this session's and the global store, oldest first: `id`,
        `trigger`, `scope`, `summary`, `rationale`, `expected_outcome`, `edits` (each with
        `action`, `kind`, `id`, `applied`, `error`, `before`, `after`), `rollback_of`,
        `harness_version`, `created_at`, and `error` when planning failed."""
        records = await self._call(REFINEMENT_HISTORY, {})
        return [refinement_record(record) for record in records]

    async def rollback(self, refinement_id: str) -> Record:
        """Revert a refinement exactly, as a new recorded refinement. From a cell the agent is
        busy, so it is queued and applies at the next turn boundary."""
        answer = await self._call(ROLLBACK_REFINEMENT, {"id": refinement_id})
        if isinstance(answer.get("refinement"), dict):
            answer = {**answer, "refinement": refinement_record(answer["refinement"])}
        return Record(**answer)

    def __repr__(self) -> str:
        return (
            "refine: await refine.run(instructions=None, global_=False), await refine.status(), "
            "await refine.history(), await refine.rollback(refinement_id)"
        )
