"""Which snapshot shows the kernel as a turn began, and every reason a revert leaves the kernel
alone (core/turn_review.py; docs/pairing.md, section 5). The session log and the manifests are
written as the agent and the host write them; the server tests (test_turn_revert.py) run them
against a real kernel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_agent_lab.core.sessions import SessionLog, SessionRepository
from prime_agent_lab.core.snapshots import MANIFEST, PREVIOUS_MANIFEST, state_directory
from prime_agent_lab.core.trust import Signer
from prime_agent_lab.core.turn_review import (
    CELL_RAN_BETWEEN,
    NO_COUNT,
    NO_SNAPSHOT_KEPT,
    RESTARTED_IN_TURN,
    UNTRUSTED_SNAPSHOT,
    plan_kernel,
    read_turn,
    revert_text,
)

SIGNER = Signer(b"the secret of the turn review tests")
BEFORE = "2026-01-01T10:00:00.000+00:00"


def session(tmp_path: Path, counts: list[int | None], status: str = "ok") -> SessionLog:
    """Turn 1 with one cell per count (the last one may carry `status`)."""
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    log.append("user_message", turn=1, text="go")
    calls = [{"id": f"c{i}", "name": "python", "arguments": json.dumps({"code": f"v{i} = {i}"})}
             for i in range(len(counts))]  # fmt: skip
    log.append("assistant_message", turn=1, text="", tool_calls=calls)
    for i, count in enumerate(counts):
        log.append("cell_started", turn=1, tool_call_id=f"c{i}", cell_id=f"cell{i}")
        log.append(
            "tool_result",
            turn=1,
            tool_call_id=f"c{i}",
            cell_id=f"cell{i}",
            status=status if i == len(counts) - 1 else "ok",
            execution_count=count,
            observation="",
        )
    log.append("turn_end", turn=1, stop_reason="end_turn", final_text="")
    return log


def keep(log: SessionLog, name: str, count: int, time: str, signed: bool = True) -> None:
    manifest: dict[str, Any] = {"version": 2, "time": time, "execution_count": count, "saved": []}
    if signed:
        manifest = SIGNER.sign_object("snapshot", manifest)
    folder = state_directory(log.directory)
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(json.dumps(manifest))


def plan(log: SessionLog, kernel_count: int | None) -> Any:
    return plan_kernel(read_turn(log, 1), log.directory, SIGNER, kernel_count)


def test_the_snapshot_whose_count_is_the_first_cells_is_chosen(tmp_path: Path) -> None:
    log = session(tmp_path, [5, 6])
    keep(log, MANIFEST, 7, "2099-01-01T00:00:00.000+00:00")  # after the turn
    keep(log, PREVIOUS_MANIFEST, 5, BEFORE)

    chosen = plan(log, 7)

    assert chosen.reason is None and chosen.snapshot.previous is True
    assert chosen.wire() == {"restorable": True, "reason": None, "snapshot_time": BEFORE}


def test_every_doubt_is_a_reason_and_no_snapshot(tmp_path: Path) -> None:
    cases = {
        "a later cell": ([5, 6], [(MANIFEST, 5, BEFORE)], 8, "1 cell ran in the kernel after"),
        "restarted after": ([5, 6], [(MANIFEST, 5, BEFORE)], 3, "restarted after this turn"),
        "gone": ([5, 6], [(MANIFEST, 7, "2099-01-01T00:00:00.000+00:00")], 7, NO_SNAPSHOT_KEPT),
        "between": ([5, 6], [(MANIFEST, 4, BEFORE)], 7, CELL_RAN_BETWEEN),
        "no count": ([5, None], [(MANIFEST, 5, BEFORE)], 7, NO_COUNT),
        "cannot ask": ([5], [(MANIFEST, 5, BEFORE)], None, "the kernel is busy"),
    }
    for name, (counts, manifests, now, reason) in cases.items():
        log = session(tmp_path / name.replace(" ", "-"), counts)
        for file, count, time in manifests:
            keep(log, file, count, time)
        found = plan(log, now)
        assert found.snapshot is None and reason in str(found.reason), (name, found)


def test_a_restart_in_the_turn_and_an_unsigned_snapshot_are_refused(tmp_path: Path) -> None:
    died = session(tmp_path / "died", [5, 6], status="died")
    keep(died, MANIFEST, 5, BEFORE)
    assert plan(died, 7).reason == RESTARTED_IN_TURN

    unsigned = session(tmp_path / "unsigned", [5])
    keep(unsigned, MANIFEST, 5, BEFORE, signed=False)
    assert plan(unsigned, 6).reason == UNTRUSTED_SNAPSHOT and plan(unsigned, 6).snapshot is None


def test_a_snapshot_taken_after_the_first_cell_ended_is_not_the_one_before_the_turn(
    tmp_path: Path,
) -> None:
    """Same count, later kernel process (a restart brought the count back): never chosen."""
    log = session(tmp_path, [5])
    keep(log, MANIFEST, 5, "2099-01-01T00:00:00.000+00:00")
    assert plan(log, 6).reason == NO_SNAPSHOT_KEPT


def test_a_turn_whose_cells_never_ran_leaves_the_kernel_untouched(tmp_path: Path) -> None:
    log = session(tmp_path, [None], status="skipped")
    found = plan(log, None)
    assert found.untouched and found.snapshot is None
    assert read_turn(log, 1).cells[0]["first_line"] == "v0 = 0"


def test_the_revert_notice_says_what_came_back_and_what_could_not_and_never_none(
    tmp_path: Path,
) -> None:
    record = read_turn(session(tmp_path, [3, 4]), 1)
    cells = [c["cell_id"] for c in record.cells]

    failed = [{"name": "z", "reason": "no pickle"}]
    partial = {"restored": [{"name": "x"}], "removed": ["y"], "failed": failed}
    nothing = {"restored": [], "removed": [], "failed": failed}
    plain = {"restored": [], "removed": ["y"], "failed": []}

    assert revert_text(record, cells, True, "restored", partial, None) == (
        "The user reverted your turn 1: its 2 cells were removed from the notebook and the "
        "kernel was restored only in part to the snapshot taken before it: brought back: x; "
        "deleted: y; could not be brought back: z (no pickle)."
    )
    assert "nothing was brought back; could not be brought back: z" in revert_text(
        record, cells, True, "restored", nothing, None
    )
    assert revert_text(record, cells, True, "restored", plain, None) == (
        "The user reverted your turn 1: its 2 cells were removed from the notebook and the "
        "kernel's variables were restored to the snapshot taken before it; deleted: y."
    )
    for report in (partial, nothing, plain):
        assert "(none)" not in revert_text(record, cells, True, "restored", report, None)
