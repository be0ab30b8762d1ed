"""One agent's refinements: planned in the background, applied at the next turn boundary.

`schedule` queues a request; one planner call runs at a time (a newer request waits until the
previous one is planned and applied, so it plans on the harness as that one left it). A planned
proposal is applied before the next model call of a running turn (`at_boundary`) or at once when
the agent is idle, never while a cell runs. Rollbacks asked for by the panel or REST wait the
same way. Every refinement, failed ones included, is recorded: in its store's
`refinements.jsonl`, in the session log (entry `refinement`, which the model reads as a short
note at its next call), and as a `refinement` event for the chat. Design note: docs/harness.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..agent_view import AgentView
from ..messages import Message, ModelRequest
from ..ports import ProviderError
from .refine_apply import (
    Baseline,
    apply_edits,
    baseline_of,
    rollback_edits,
)
from .refine_plan import PLANNER_SYSTEM, PlanError, Proposal, parse_proposal, planner_prompt
from .store import Harness, HarnessError, HarnessStore

log = logging.getLogger(__name__)

PLAN_MAX_TOKENS = 8_192
PLAN_MAX_TOKENS_CAP = 32_000
QUEUED = "queued: applies at the next turn boundary"
CHANGED_SINCE = "entry changed since refinement {0} was applied; not rolled back"
CHANGED_SINCE_ASKED = "entry changed after the delete was asked for; not deleted"
NOTE_EDITS = 6  # edits named in the model's note; the rest are counted


class RefineError(Exception):
    """A refine request that cannot be done (`status`: 400 bad input, 404 unknown id, 409)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class RefineRequest:
    instructions: str | None
    global_: bool
    trigger: str

    @property
    def scope(self) -> str:
        return "global" if self.global_ else "local"


@dataclass
class Planned:
    """A request whose planner call is done: the proposal (or why there is none)."""

    request: RefineRequest
    proposal: Proposal | None = None
    baseline: Baseline = field(default_factory=dict)
    error: str | None = None


def _pending() -> asyncio.Future[dict[str, Any]]:
    return asyncio.get_running_loop().create_future()


@dataclass(frozen=True)
class Rollback:
    record: dict[str, Any]
    store: HarnessStore
    # Its record once applied: whichever apply takes the queue applies it (not always the
    # apply its asker started), so the asker reads its answer here.
    applied: asyncio.Future[dict[str, Any]] = field(default_factory=_pending, compare=False)


@dataclass(frozen=True)
class Removal:
    """A delete asked for by the user (the panel): applied at the boundary, recorded as a
    refinement (so it can be rolled back), not over a change made after it was asked for."""

    kind: str
    entry_id: str
    store: HarnessStore
    baseline: Baseline
    applied: asyncio.Future[dict[str, Any]] = field(default_factory=_pending, compare=False)


class Refiner:
    """The refinements of one agent (`Refiners` keeps one per loaded agent)."""

    def __init__(self, agent: AgentView, harness: Harness) -> None:
        self.agent = agent
        self.harness = harness
        self._waiting: deque[RefineRequest] = deque()  # not planned yet
        self._planning: RefineRequest | None = None  # its planner call runs now
        self._ready: Planned | None = None  # planned, waiting for the boundary
        self._rollbacks: list[Rollback | Removal] = []  # user operations, in order
        self._applied = asyncio.Event()
        self._apply_lock = asyncio.Lock()
        self._planner: asyncio.Task[None] | None = None
        self._applying: asyncio.Future[list[dict[str, Any]]] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------ asking

    def schedule(
        self, instructions: str | None = None, global_: bool = False, trigger: str = "user"
    ) -> dict[str, Any]:
        """Queue a refinement: `{scheduled: True, note}` or `{scheduled: False, reason}`."""
        if instructions is not None and not isinstance(instructions, str):
            raise RefineError(400, "instructions must be a string or None")
        if not isinstance(global_, bool):
            raise RefineError(400, "global_ must be True or False")
        if not global_ and self.harness.local is None:
            return {
                "scheduled": False,
                "reason": "this agent has no local harness store; refine with global_=True",
            }
        busy = self._planning is not None or self._ready is not None or bool(self._waiting)
        self._waiting.append(RefineRequest(instructions or None, global_, trigger))
        if self._planner is None or self._planner.done():
            self._planner = self._start(self._plan_all())
        note = "planning in the background; the proposal applies at the next turn boundary"
        if busy:
            note = "queued behind the refinement under way; " + note
        return {"scheduled": True, "note": note}

    def status(self) -> dict[str, Any]:
        return {
            "pending": len(self._waiting) + (self._ready is not None) + len(self._rollbacks),
            "in_flight": self._planning is not None,
            "waiting_to_apply": self._ready is not None,
            "queued_rollbacks": [
                r.record.get("id") for r in self._rollbacks if isinstance(r, Rollback)
            ],
            "queued_deletes": [
                f"{r.store.scope}:{r.kind}:{r.entry_id}"
                for r in self._rollbacks
                if isinstance(r, Removal)
            ],
        }

    def history(self) -> list[dict[str, Any]]:
        """The records of both stores this agent sees, oldest first, each with its `scope`."""
        return self.read_history()[0]

    def read_history(self) -> tuple[list[dict[str, Any]], list[str]]:
        """`history()`, and what could not be read (a record file named, with why)."""
        records: list[dict[str, Any]] = []
        problems: list[str] = []
        for store in self.harness.stores():
            found, unreadable = store.read_refinements()
            records.extend({**r, "scope": r.get("scope", store.scope)} for r in found)
            problems.extend(unreadable)
        records.sort(key=lambda r: (str(r.get("created_at", "")), str(r.get("id", ""))))
        return records, problems

    async def rollback(self, refinement_id: object) -> dict[str, Any]:
        """Roll a recorded refinement back: at once when the agent is idle (`applied` and the
        new record), else at the next turn boundary (`queued`)."""
        record, store = self._find(refinement_id)
        later = [r for r in self.history() if r.get("rollback_of") == record["id"]]
        if later:
            raise RefineError(409, f"{record['id']} was already rolled back by {later[-1]['id']}")
        if any(isinstance(r, Rollback) and r.record["id"] == record["id"] for r in self._rollbacks):
            raise RefineError(409, f"a rollback of {record['id']} is already queued")
        return await self._ask(Rollback(record, store))

    async def delete(self, kind: str, entry_id: str, global_: bool = False) -> dict[str, Any]:
        """Delete an entry for the user (the panel): like a rollback, at once when the agent is
        idle, else queued for the next turn boundary; recorded as a refinement (`trigger`
        `delete`), so it can be rolled back."""
        try:
            store = self.harness.store(global_)
            baseline = baseline_of(await asyncio.to_thread(store.read))
        except HarnessError as exc:
            raise RefineError(exc.status, str(exc)) from None
        if (kind, entry_id) not in baseline:
            raise RefineError(404, f"no {kind} {entry_id!r} in the {store.scope} store")
        return await self._ask(Removal(kind, entry_id, store, baseline))

    async def _ask(self, operation: Rollback | Removal) -> dict[str, Any]:
        """Queue a rollback or delete; apply it at once when the agent is idle."""
        self._rollbacks.append(operation)
        if self.agent.running:
            return {"queued": True, "applied": False, "note": QUEUED}
        await self.apply_ready()  # applies it, or finds an apply under way already did
        if not operation.applied.done() or operation.applied.cancelled():
            raise RefineError(500, "the change failed while it was applied (see the server log)")
        record = operation.applied.result()
        return {"queued": False, "applied": True, "note": "applied", "refinement": record}

    def _find(self, refinement_id: object) -> tuple[dict[str, Any], HarnessStore]:
        if not isinstance(refinement_id, str) or not refinement_id:
            raise RefineError(400, "name the refinement by its id (refine.history() lists them)")
        for store in self.harness.stores():
            for record in store.refinements():
                if record.get("id") == refinement_id:
                    return record, store
        raise RefineError(404, f"no refinement {refinement_id!r} (refine.history() lists them)")

    # ------------------------------------------------------------ planning (background)

    async def _plan_all(self) -> None:
        while self._waiting:
            request = self._waiting.popleft()
            self._planning = request
            try:
                planned = await self._plan(request)
            finally:
                self._planning = None
            self._applied.clear()
            self._ready = planned
            if not self.agent.running:
                self._start(self.apply_ready())
            await self._applied.wait()  # the next plan starts from what this one left

    async def _plan(self, request: RefineRequest) -> Planned:
        try:
            store = self.harness.store(request.global_)
            baseline = baseline_of(await asyncio.to_thread(store.read))
            prompt = await asyncio.to_thread(self._prompt, request)
            response = await self.agent.side_call(self._turn(), self._request(prompt))
            proposal = parse_proposal(response.text, response.stop_reason)
        except ProviderError as exc:
            return Planned(request, error=f"the planner call failed ({exc.kind}): {exc}")
        except (PlanError, HarnessError) as exc:
            return Planned(request, error=str(exc))
        except Exception as exc:  # a refinement never costs the turn; it is recorded failed
            log.exception("planning a refinement of %s failed", self.agent.session_id)
            return Planned(request, error=f"planning failed: {type(exc).__name__}: {exc}")
        return Planned(request, proposal, baseline)

    def _prompt(self, request: RefineRequest) -> str:
        entries = [entry.to_dict() for entry in self.harness.list()]
        return planner_prompt(
            entries,
            self.history(),
            self.agent.session.path(),
            request.scope,
            request.instructions,
        )

    def _request(self, prompt: str) -> ModelRequest:
        return ModelRequest(
            system=PLANNER_SYSTEM,
            messages=[Message(role="user", text=prompt)],
            tools=[],
            max_tokens=min(max(self.agent.config.max_tokens, PLAN_MAX_TOKENS), PLAN_MAX_TOKENS_CAP),
            accepts_images=False,
            purpose="refine",
        )

    def _turn(self) -> int:
        return self.agent.current_turn or self.agent.session.turns()

    # ------------------------------------------------------------ applying (turn boundary)

    async def at_boundary(self) -> None:
        """Before a model call of a running turn: apply what is ready."""
        if self._ready is not None or self._rollbacks or self._apply_lock.locked():
            await self.apply_ready()  # an apply begun while idle finishes first

    def turn_ended(self) -> None:
        """The agent is idle: apply what became ready while its turn ran."""
        if self._ready is not None or self._rollbacks:
            self._start(self.apply_ready())

    async def apply_ready(self) -> list[dict[str, Any]]:
        """Apply the planned proposal and the queued rollbacks; their records, in order."""
        async with self._apply_lock:
            # Once begun, an apply runs to its record even if its caller is cancelled (the
            # agent closing): the store write runs in a thread that a cancel cannot stop.
            self._applying = asyncio.ensure_future(self._apply_all())
            return await asyncio.shield(self._applying)

    async def _apply_all(self) -> list[dict[str, Any]]:
        done: list[dict[str, Any]] = []
        planned, self._ready = self._ready, None
        if planned is not None:
            done.append(await self._apply_planned(planned))
            self._applied.set()
        while self._rollbacks:
            operation = self._rollbacks.pop(0)
            try:
                if isinstance(operation, Rollback):
                    record = await self._apply_rollback(operation)
                else:
                    record = await self._apply_removal(operation)
            except BaseException:
                operation.applied.cancel()
                raise
            operation.applied.set_result(record)
            done.append(record)
        return done

    async def _apply_planned(self, planned: Planned) -> dict[str, Any]:
        request, proposal = planned.request, planned.proposal
        edits: list[dict[str, Any]] = []
        error = planned.error
        if proposal is not None:
            store = self.harness.store(request.global_)
            try:
                edits = await asyncio.to_thread(
                    apply_edits, store, proposal.edits, planned.baseline
                )
            except HarnessError as exc:
                error = f"the {request.scope} store could not be changed: {exc}"
        return await self._record(
            request.trigger,
            request.scope,
            request.instructions,
            proposal or Proposal(summary="Refinement failed"),
            edits,
            error=error,
        )

    async def _apply_rollback(self, rollback: Rollback) -> dict[str, Any]:
        record, store = rollback.record, rollback.store
        edits, baseline = rollback_edits(record)
        error = None
        try:
            applied = await asyncio.to_thread(
                apply_edits, store, edits, baseline, CHANGED_SINCE.format(record["id"])
            )
        except HarnessError as exc:
            applied, error = [], f"the {store.scope} store could not be changed: {exc}"
        proposal = Proposal(
            summary=f"Rollback of {record['id']}: {record.get('summary', '')}".rstrip(": "),
            rationale=f"requested rollback of refinement {record['id']}",
            expected_outcome="the entries are as they were before that refinement",
        )
        rolled_back = {
            "summary": record.get("summary", ""),
            "created_at": record.get("created_at", ""),
        }
        return await self._record(
            "rollback",
            store.scope,
            None,
            proposal,
            applied,
            rollback_of=record["id"],
            rolled_back=rolled_back,
            error=error,
        )

    async def _apply_removal(self, removal: Removal) -> dict[str, Any]:
        edit = {"action": "delete", "kind": removal.kind, "id": removal.entry_id}
        error = None
        try:
            applied = await asyncio.to_thread(
                apply_edits, removal.store, [edit], removal.baseline, CHANGED_SINCE_ASKED
            )
        except HarnessError as exc:
            applied, error = [], f"the {removal.store.scope} store could not be changed: {exc}"
        proposal = Proposal(
            summary=f"Delete {removal.kind} {removal.entry_id}",
            rationale="deleted by the user",
            expected_outcome="the entry is gone; a rollback of this refinement brings it back",
        )
        return await self._record(
            "delete", removal.store.scope, None, proposal, applied, error=error
        )

    async def _record(
        self,
        trigger: str,
        scope: str,
        instructions: str | None,
        proposal: Proposal,
        edits: list[dict[str, Any]],
        rollback_of: str | None = None,
        rolled_back: dict[str, str] | None = None,
        error: str | None = None,
    ) -> dict[str, Any]:
        store = self.harness.store(scope == "global")
        record: dict[str, Any] = {
            "id": self._new_id(),
            "trigger": trigger,
            "scope": scope,
            "instructions": instructions,
            "summary": proposal.summary,
            "rationale": proposal.rationale,
            "expected_outcome": proposal.expected_outcome,
            "edits": [_plain(edit) for edit in edits],
            "rollback_of": rollback_of,
            "harness_version": self._version(),
            "created_at": _now(),
            "session_id": self.agent.session_id,
        }
        if rolled_back is not None:
            record["rolled_back"] = rolled_back
        if error is not None:
            record["error"] = error
        try:
            await asyncio.to_thread(store.append_refinement, record)
        except OSError as exc:  # the session log and the chat still have it
            log.warning("recording refinement %s in %s failed: %s", record["id"], store, exc)
        text = note_for(record)
        turn = self.agent.current_turn
        fields: dict[str, Any] = {"turn": turn} if turn else {}
        self.agent.session.append("refinement", **fields, refinement=record, text=text)
        self.agent.events.emit("refinement", **fields, refinement=record, text=text)
        return record

    def _version(self) -> dict[str, int]:
        try:
            return self.harness.version()
        except HarnessError:
            return {"local": -1, "global": -1}

    def _new_id(self) -> str:
        taken = {str(r.get("id")) for r in self.history()}
        stamp = datetime.now(UTC)
        while True:
            candidate = "refine_" + stamp.strftime("%Y%m%d%H%M%S%f")[:17]
            if candidate not in taken:
                return candidate
            stamp = stamp.replace(microsecond=(stamp.microsecond + 1000) % 1_000_000)

    # ------------------------------------------------------------ lifetime

    def _start(self, work: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            log.error("a refinement task of %s failed", self.agent.session_id, exc_info=error)

    def pending(self) -> bool:
        """A refinement, rollback or delete asked for and not yet applied."""
        planning = self._planner is not None and not self._planner.done()
        return planning or self._ready is not None or bool(self._rollbacks)

    async def finish(self) -> None:
        """Plan and apply everything asked for (a headless run ending): waits for the planner
        call. The agent is idle, so each plan applies as soon as it is ready."""
        while self._planner is not None and not self._planner.done():
            await asyncio.wait({self._planner})
        if self._ready is not None or self._rollbacks:
            await self.apply_ready()
        if self._applying is not None:
            await asyncio.wait({self._applying})

    async def close(self) -> None:
        """Cancel planning (the agent leaves memory); what was applied stays recorded."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._applying is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._applying  # an apply under way finishes with its record


def note_for(record: dict[str, Any]) -> str:
    """What the model reads at its next call: what changed, what was rejected and why."""
    head = f"[refinement {record['id']}] ({record['trigger']}, {record['scope']} harness)"
    if record.get("rollback_of"):
        head += f" rollback of {record['rollback_of']}"
    if record.get("error"):
        return f"{head} failed: {record['error']}. Nothing changed."
    edits = record.get("edits") or []
    applied = [e for e in edits if e.get("applied")]
    rejected = [e for e in edits if not e.get("applied")]
    if not edits:
        return f"{head}: no edits ({record.get('summary', '')})."
    parts = [f"{head}: {record.get('summary', '')}."]
    if applied:
        parts.append("Applied: " + _edit_list(applied, with_error=False) + ".")
    if rejected:
        parts.append("Rejected: " + _edit_list(rejected, with_error=True) + ".")
    parts.append("The harness section of your prompt shows the result.")
    return " ".join(parts)


def _edit_list(edits: list[dict[str, Any]], with_error: bool) -> str:
    shown = []
    for edit in edits[:NOTE_EDITS]:
        item = f"{edit.get('action')} {edit.get('kind')} {edit.get('id')}"
        if with_error:
            item += f" ({edit.get('error')})"
        shown.append(item)
    if len(edits) > NOTE_EDITS:
        shown.append(f"+{len(edits) - NOTE_EDITS} more")
    return "; ".join(shown)


def _plain(edit: dict[str, Any]) -> dict[str, Any]:
    """An edit record as JSON data (a rollback's edits carry a `restore` object)."""
    return {k: v for k, v in edit.items() if k != "restore"}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
