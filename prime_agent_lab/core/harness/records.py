"""What a refinement record read from `refinements.jsonl` must hold (wire.RefinementRecord), so a
record of the wrong shape is skipped and counted instead of failing the history, a rollback or
the chat panel later."""

from __future__ import annotations

from typing import Any

_TEXT_OR_NULL = ("instructions", "rollback_of")
_TEXT = ("trigger", "scope", "summary", "rationale", "expected_outcome", "created_at")
_EDIT_TEXT_OR_NULL = ("action", "kind", "id", "error", "reason")


def refinement_problem(record: Any) -> str | None:
    """Why `record` is not a refinement record this product reads, or None."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if not isinstance(record.get("id"), str) or not record["id"]:
        return "no id"
    for key in (*_TEXT, "session_id", "error"):
        if key in record and not isinstance(record[key], str):
            return f"{key!r} is not a string"
    for key in _TEXT_OR_NULL:
        if record.get(key) is not None and not isinstance(record[key], str):
            return f"{key!r} is not a string"
    if not isinstance(record.get("harness_version", {}), dict):
        return "'harness_version' is not an object"
    edits = record.get("edits", [])
    if not isinstance(edits, list):
        return "'edits' is not a list"
    for edit in edits:
        problem = _edit_problem(edit)
        if problem is not None:
            return f"an edit {problem}"
    return None


def _edit_problem(edit: Any) -> str | None:
    if not isinstance(edit, dict):
        return "is not an object"
    for key in ("before", "after"):
        if edit.get(key) is not None and not isinstance(edit[key], dict):
            return f"has {key!r} that is not an entry"
    for key in _EDIT_TEXT_OR_NULL:
        if edit.get(key) is not None and not isinstance(edit[key], str):
            return f"has {key!r} that is not a string"
    if not isinstance(edit.get("applied", False), bool):
        return "has 'applied' that is not true or false"
    return None
