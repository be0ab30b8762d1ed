"""What became of a harness action the host queued for the next turn boundary (a rollback or a
delete from the harness panel): the refinement record the host writes when it applies it.

The host answers "queued: applies at the next turn boundary"; the panel keeps that line until
the record shows up in the state it follows, then says how it went."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class QueuedAction:
    """An action the host queued: `what` the panel said ("Rollback of r1"), the refinement it
    rolls back (`rollback_of`) or the entry it deletes (`delete`: kind and id), and the ids of
    the records that existed before it was asked for (none of them can be its outcome)."""

    what: str
    known: frozenset[str]
    rollback_of: str | None = None
    delete: tuple[str, str] | None = None

    def outcome_in(self, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The record that applied this action, or None while it is still queued."""
        for record in records:
            if not isinstance(record, dict) or record.get("id") in self.known:
                continue
            if self.rollback_of is not None and record.get("rollback_of") == self.rollback_of:
                return record
            if self.delete is not None and record.get("trigger") == "delete":
                edits = record.get("edits") or []
                if any(_deletes(edit, self.delete) for edit in edits):
                    return record
        return None


def _deletes(edit: Any, target: tuple[str, str]) -> bool:
    return isinstance(edit, dict) and (edit.get("kind"), edit.get("id")) == target


def is_queued(answer: Any) -> bool:
    """Whether the host's answer says the action waits for the turn boundary."""
    if not isinstance(answer, dict):
        return False
    note = answer.get("note")
    return answer.get("queued") is True or (isinstance(note, str) and note.startswith("queued"))


def describe_outcome(record: dict[str, Any]) -> tuple[str, str]:
    """The line for an applied action's record and its tone (`info` or `error`)."""
    if isinstance(record.get("error"), str) and record["error"]:
        return f"failed: {record['error']}", "error"
    edits = [e for e in record.get("edits") or [] if isinstance(e, dict)]
    applied = sum(1 for e in edits if e.get("applied"))
    rejected = [e for e in edits if not e.get("applied")]
    if rejected and not applied:
        why = next((str(e["error"]) for e in rejected if e.get("error")), "rejected")
        return f"rejected: {why}", "error"
    text = f"applied ({record.get('id')})"
    if rejected:
        text += f", {len(rejected)} edit(s) rejected"
    return text, "info"
