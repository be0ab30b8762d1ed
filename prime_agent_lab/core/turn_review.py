"""Review and revert one agent turn (docs/pairing.md, section 5): the cells the turn wrote, read
from the session log, and whether the kernel can go back to how it was as the turn began.

The kernel can go back when a kept snapshot (`manifest.json` or `manifest.previous.json`) shows
it exactly then: its `execution_count` (IPython's *next* count when it was taken) is the count of
the turn's first cell that ran, it was taken before that cell's result was logged, and this user
signed it. (Not "before the cell was logged as started": the snapshot taken as the turn starts
overlaps the model's first answer and the writing of the first cell, which then waits for it in
the kernel; the count already pins the snapshot between the cell before and this one, and the
time only rules out a snapshot of a later kernel process that reached the same count.)
It must not go back when cells ran in the kernel after the turn's last cell (someone's later
work would be undone) or the kernel restarted since. Any doubt is a reason in words, and the
kernel stays as it is. The restore itself runs in the kernel (`prime_agent_kernel.snapshot.restore`
with `overwrite` and `prune`): the snapshot's values come back, and the names created after it go.
"""

from __future__ import annotations

import ast
import asyncio
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .entry_schema import code_of
from .jsonfile import MAX_MANIFEST_BYTES, UnreadableFile, read_json_object
from .kernel_gc import evaluate, silent_runner
from .sessions import SessionLog
from .snapshot_transfer import SnapshotTransfers, pull_through_bridge, shares_disk
from .snapshots import (
    RESTORE_REPORT,
    SNAPSHOT_TIMEOUT,
    KeptSnapshot,
    SnapshotFailed,
    kept_snapshots,
    state_directory,
)
from .text import preview
from .trust import Signer
from .wire import FailedName, KeptCell, TurnCell, TurnKernel, TurnRevert

FIRST_LINE_CHARS = 120
NOT_SENT = ("skipped", "invalid_arguments", "aborted")  # cells that never ran in the kernel
RESTART_NOTICES = ("kernel_restarted", "kernel_died", "kernel_restarted_externally")
COUNT_EXPRESSION = "str(__import__('IPython').get_ipython().execution_count)"
"""The kernel's next execution count, read silently (a silent run does not move it)."""

NO_SNAPSHOT_KEPT = "no snapshot from before this turn is kept (only the last turns' are)"
CELL_RAN_BETWEEN = "a cell ran in the kernel between the last snapshot and the turn"
UNTRUSTED_SNAPSHOT = (
    "the snapshot from before this turn is not signed with your secret (it was not made here), "
    "and loading a snapshot runs code"
)
RESTARTED_IN_TURN = "the kernel restarted during this turn"
NO_COUNT = (
    "a cell of this turn has no execution count (it may have run in part), so no snapshot can "
    "be matched to the turn's start"
)


CHANGED_BY_YOU = "changed by you"
NOT_THIS_AGENTS = "not this agent's cell"
KEPT_BY_YOU = "kept by you"


class TurnNotFound(LookupError):
    pass


def first_line(code: str) -> str:
    line = next((ln.strip() for ln in code.splitlines() if ln.strip()), "")
    return line if len(line) <= FIRST_LINE_CHARS else line[: FIRST_LINE_CHARS - 1] + "…"


@dataclass(frozen=True)
class TurnRecord:
    """What the session log says of one turn on the current branch."""

    turn: int
    cells: list[TurnCell]  # `in_notebook` left False: the host reads the notebook
    ended: dict[str, str]  # cell id -> when its `tool_result` was written
    restarted: bool  # a kernel restart (or death) was noticed in the turn
    reverted: bool  # a `turn_reverted` entry with `whole_turn` names it

    def ran(self) -> list[TurnCell]:
        """The cells that reached the kernel, in order."""
        return [c for c in self.cells if c["status"] not in NOT_SENT]


def read_turn(session: SessionLog, turn: int) -> TurnRecord:
    """The turn's cells, in the order they entered the notebook; TurnNotFound when the current
    branch has no such turn. The cells: every `tool_result` with a cell, a cell still running
    (`cell_started` without a result), and the waiting cell an `edit` approval left behind (its
    edited code ran in the next cell)."""
    path = session.path()
    if not any(e["type"] == "user_message" and e.get("turn") == turn for e in path):
        raise TurnNotFound(turn)
    code_by_call: dict[str, str] = {}
    cells: dict[str, TurnCell] = {}
    ended: dict[str, str] = {}
    restarted = reverted = False
    for entry in path:
        if entry.get("turn") != turn:
            continue
        kind = entry["type"]
        cell_id = entry.get("cell_id")
        call_id = str(entry.get("tool_call_id") or "")
        if kind == "assistant_message":
            for call in entry.get("tool_calls", []):
                if isinstance(call, dict):
                    code_by_call[str(call.get("id", ""))] = code_of(call.get("arguments")) or ""
        elif kind == "cell_approval" and isinstance(cell_id, str):
            if entry.get("decision") == "edit":  # the edited code runs in a new cell
                model_code = code_by_call.get(call_id, "")
                cells[cell_id] = _cell(cell_id, call_id, None, "skipped", cells, model_code)
                code_by_call[call_id] = str(entry.get("code") or "")
        elif kind == "cell_started" and isinstance(cell_id, str):
            code = code_by_call.get(call_id, "")
            cells.setdefault(cell_id, _cell(cell_id, call_id, None, "running", cells, code))
        elif kind == "tool_result" and isinstance(cell_id, str):
            count = entry.get("execution_count")
            status = str(entry.get("status") or "")
            code = code_by_call.get(call_id, "")
            cells[cell_id] = _cell(cell_id, call_id, count, status, cells, code)
            ended[cell_id] = str(entry.get("ts", ""))
            restarted = restarted or status == "died"
        elif kind == "notice" and entry.get("kind") in RESTART_NOTICES:
            restarted = True
        elif kind == "turn_reverted" and entry.get("whole_turn") is True:
            reverted = True
    return TurnRecord(turn, list(cells.values()), ended, restarted, reverted)


def _cell(
    cell_id: str,
    call_id: str,
    count: object,
    status: str,
    known: dict[str, TurnCell],
    code: str,
) -> TurnCell:
    before = known.get(cell_id)
    return {
        "cell_id": cell_id,
        "tool_call_id": call_id,
        "execution_count": count if isinstance(count, int) else None,
        "status": status,
        "first_line": first_line(code) if code or before is None else before["first_line"],
        "in_notebook": False,
        "code": code if code or before is None else before["code"],
    }


def source_of(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def kept_reason(cell: dict[str, Any], session_id: str, turn: int, code: str) -> str | None:
    """Why a revert must leave this notebook cell alone (None: it may go): it is not this
    session's agent cell of the turn (the log names it, the cell's metadata does not), or the
    user changed it (its source is not the code the agent wrote)."""
    metadata = cell.get("metadata")
    mark = metadata.get("prime_agent") if isinstance(metadata, dict) else None
    if not (
        isinstance(mark, dict)
        and mark.get("session_id") == session_id
        and mark.get("turn") == turn
        and mark.get("role") == "agent"
    ):
        return NOT_THIS_AGENTS
    return None if source_of(cell) == code else CHANGED_BY_YOU


# ---------------------------------------------------------------- the kernel


@dataclass(frozen=True)
class KernelPlan:
    """Whether the kernel can go back to the turn's start: the snapshot to restore, or why not.
    `untouched`: none of the turn's cells reached the kernel, so there is nothing to undo."""

    snapshot: KeptSnapshot | None
    reason: str | None
    untouched: bool = False

    def wire(self) -> TurnKernel:
        time = self.snapshot.manifest.get("time") if self.snapshot is not None else None
        return {
            "restorable": self.snapshot is not None,
            "reason": self.reason,
            "snapshot_time": time if isinstance(time, str) else None,
        }


def parse_count(value: object) -> int | None:
    """The kernel's answer to COUNT_EXPRESSION (a str's repr), or None."""
    if isinstance(value, int):
        return value
    try:
        count = ast.literal_eval(value) if isinstance(value, str) else value
        return int(count) if isinstance(count, str | int) else None
    except (ValueError, SyntaxError):
        return None


def plan_kernel(
    record: TurnRecord, session_dir: Path, signer: Signer, kernel_count: int | None
) -> KernelPlan:
    """`kernel_count`: the kernel's next execution count now (None: it could not be asked)."""
    ran = record.ran()
    if not ran:
        return KernelPlan(None, "none of this turn's cells ran in the kernel", untouched=True)
    if record.restarted:
        return KernelPlan(None, RESTARTED_IN_TURN)
    counts = [c["execution_count"] for c in ran if c["execution_count"] is not None]
    if len(counts) < len(ran):
        return KernelPlan(None, NO_COUNT)
    first, last = counts[0], max(counts)
    if kernel_count is None:
        return KernelPlan(
            None,
            "the kernel is busy (a cell may be running in it) or gone, so it could not say "
            "whether cells ran after this turn",
        )
    if kernel_count > last + 1:
        later = kernel_count - last - 1
        return KernelPlan(
            None,
            f"{later} cell{'s' if later > 1 else ''} ran in the kernel after this turn; "
            "restoring it would undo that work",
        )
    if kernel_count < last + 1:
        return KernelPlan(None, "the kernel restarted after this turn")
    first_end = _time(record.ended.get(ran[0]["cell_id"], ""))
    return _choose(kept_snapshots(session_dir, signer), first, first_end)


def _choose(kept: list[KeptSnapshot], first: int, first_end: datetime | None) -> KernelPlan:
    def taken_before(snapshot: KeptSnapshot) -> bool:
        taken = _time(snapshot.manifest.get("time"))
        return first_end is not None and taken is not None and taken <= first_end

    before = [k for k in kept if taken_before(k)]
    matching = [k for k in before if k.manifest.get("execution_count") == first]
    if matching:  # the latest this user signed that shows the kernel as the turn began
        signed = [k for k in matching if k.trusted]
        return KernelPlan(signed[0], None) if signed else KernelPlan(None, UNTRUSTED_SNAPSHOT)
    counts = [k.manifest.get("execution_count") for k in before]
    if any(isinstance(c, int) and c < first for c in counts) and not any(
        isinstance(c, int) and c > first for c in counts
    ):
        return KernelPlan(None, CELL_RAN_BETWEEN)
    return KernelPlan(None, NO_SNAPSHOT_KEPT)


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def revert_code(session_dir: Path, snapshot: KeptSnapshot) -> str:
    """The silent run that brings the snapshot back over the kernel and deletes what came after
    it; the kernel loads nothing unless the manifest's digest is the one checked here."""
    directory = state_directory(session_dir)
    return (
        "import prime_agent_kernel.snapshot as _prime_agent_snapshot\n"
        f"_prime_agent_snapshot.restore({str(directory)!r}, overwrite=True, prune=True, "
        f"previous={snapshot.previous!r}, expect={snapshot.digest!r})\n"
        "del _prime_agent_snapshot\n"
    )


COUNT_TIMEOUT = 5.0
"""How long the kernel may take to say its count: it answers after a cell that runs in it now,
and such a cell is later work a restore would undo anyway."""


async def kernel_count(kernel: Any, timeout: float = COUNT_TIMEOUT) -> int | None:
    """The kernel's next execution count, asked silently; None when it cannot be asked (no
    kernel yet, or a cell still runs in it)."""
    try:  # bounded as a whole: the executor's lock may be held by a snapshot being taken
        async with asyncio.timeout(timeout):
            return parse_count(await evaluate(kernel, COUNT_EXPRESSION, timeout))
    except Exception:
        return None


async def restore_before_turn(
    kernel: Any,
    session_dir: Path,
    snapshot: KeptSnapshot,
    transfers: SnapshotTransfers | None = None,
) -> dict[str, Any]:
    """Run the revert in the kernel; its report (`refused` says why nothing was loaded). A
    kernel that does not share the host's disk reads the snapshot over the bridge."""
    run = silent_runner(kernel)
    if run is None:
        raise SnapshotFailed("this agent has no kernel yet")
    if transfers is not None and not shares_disk(kernel):
        directory = state_directory(session_dir)
        pulled = await pull_through_bridge(
            run, directory, snapshot.previous, snapshot.digest, transfers,
            only_if_fresh=False, overwrite=True, prune=True,
        )  # fmt: skip
        if pulled is None:
            raise SnapshotFailed("the kernel gave no restore report")
        return pulled
    report_file = state_directory(session_dir) / RESTORE_REPORT
    report_file.unlink(missing_ok=True)
    reply = await run(revert_code(session_dir, snapshot), SNAPSHOT_TIMEOUT)
    if reply.get("status") != "ok":
        raise SnapshotFailed(f"{reply.get('ename', 'error')}: {reply.get('evalue', '')}")
    try:
        return read_json_object(report_file, MAX_MANIFEST_BYTES)
    except UnreadableFile:
        raise SnapshotFailed("the kernel wrote no restore report") from None


# ---------------------------------------------------------------- what the model and the chat read


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:30])
    return f"{shown} and {len(names) - 30} more" if len(names) > 30 else shown


def _cells_removed(count: int, kept: list[KeptCell]) -> str:
    if kept:
        removed = "no cell" if count == 0 else f"{count} cell{'s' if count > 1 else ''}"
        return f"{removed} of it {'was' if count == 1 else 'were'} removed from the notebook"
    if count == 0:
        return "none of its cells was still in the notebook"
    if count == 1:
        return "its cell was removed from the notebook"
    return f"its {count} cells were removed from the notebook"


KEPT_FOR_MODEL = {
    CHANGED_BY_YOU: "the user changed it",
    NOT_THIS_AGENTS: "not your cell",
    KEPT_BY_YOU: "the user kept it",
}


def _kept_text(kept: list[KeptCell]) -> str:
    """The sentence naming the cells a revert left in the notebook ("" when none)."""
    if not kept:
        return ""
    shown = ", ".join(
        f"`{preview(k['first_line'], 80)}` ({KEPT_FOR_MODEL.get(k['reason'], k['reason'])})"
        for k in kept
    )
    return f" Kept in the notebook: {shown}."


def revert_text(
    record: TurnRecord,
    removed_cells: list[str],
    whole: bool,
    kernel: str,
    report: dict[str, Any],
    reason: str | None,
    kept: list[KeptCell] = (),  # type: ignore[assignment]
) -> str:
    """The line the model reads (after "[notice] ") and the chat shows."""
    turn = record.turn
    kept = list(kept)
    if not whole:
        lines = {c["cell_id"]: c["first_line"] for c in record.cells}
        shown = ", ".join(f"`{preview(lines.get(i, ''), 80)}`" for i in removed_cells)
        if not removed_cells:
            kept_text = _kept_text(kept)
            return (
                f"The user tried to remove cells of your turn {turn}; none was removed.{kept_text}"
            )
        if len(removed_cells) == 1:
            return (
                f"The user removed one cell of your turn {turn} from the notebook ({shown}); "
                f"what it set is still in the kernel.{_kept_text(kept)}"
            )
        return (
            f"The user removed {len(removed_cells)} cells of your turn {turn} from the notebook "
            f"({shown}); what they set is still in the kernel.{_kept_text(kept)}"
        )
    head = f"The user reverted your turn {turn}: {_cells_removed(len(removed_cells), kept)}"
    if kernel == "untouched":
        return f"{head}; none of them ran, so the kernel is as it was.{_kept_text(kept)}"
    if kernel == "not_restored":
        return (
            f"{head}; the kernel was not restored ({reason}): what those cells set is still in "
            f"the kernel.{_kept_text(kept)}"
        )
    return f"{head}{_restored_text(report)}{_kept_text(kept)}"


def _restored_text(report: dict[str, Any]) -> str:
    """What came back from the snapshot, what the turn created that went, what could not."""
    restored = restored_names(report)
    deleted = [str(n) for n in report.get("removed", [])]
    failed = failures(report)
    if not failed:
        text = " and the kernel's variables were restored to the snapshot taken before it"
        text += f" ({_names(restored)})" if restored else ""
        return text + (f"; deleted: {_names(deleted)}." if deleted else ".")
    text = " and the kernel was restored only in part to the snapshot taken before it: "
    text += f"brought back: {_names(restored)}; " if restored else "nothing was brought back; "
    text += f"deleted: {_names(deleted)}; " if deleted else ""
    shown = _names([f"{f['name']} ({preview(f['reason'], 120)})" for f in failed])
    return text + f"could not be brought back: {shown}."


def restored_names(report: dict[str, Any]) -> list[str]:
    names = [str(e.get("name")) for e in report.get("restored", []) if isinstance(e, dict)]
    return names + [str(e.get("name")) for e in report.get("imports", []) if isinstance(e, dict)]


def failures(report: dict[str, Any]) -> list[FailedName]:
    return [
        {"name": str(e.get("name")), "reason": str(e.get("reason", ""))}
        for e in report.get("failed", [])
        if isinstance(e, dict)
    ]


def revert_answer(
    record: TurnRecord,
    removed_cells: list[str],
    whole: bool,
    kernel: str,
    report: dict[str, Any],
    reason: str | None,
    kept: list[KeptCell] = (),  # type: ignore[assignment]
) -> TurnRevert:
    return {
        "turn": record.turn,
        "cells_removed": removed_cells,
        "cells_kept": list(kept),
        "whole_turn": whole,
        "kernel": kernel,  # type: ignore[typeddict-item]
        "restored": restored_names(report) if kernel == "restored" else [],
        "removed": [str(n) for n in report.get("removed", [])] if kernel == "restored" else [],
        "failed": failures(report),
        "reason": reason,
        "text": revert_text(record, removed_cells, whole, kernel, report, reason, kept),
    }
