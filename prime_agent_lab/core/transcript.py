"""Read-only views of a session log: for the kernel's `history` and for the chat panel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .answer_cost import answer_price
from .entry_schema import ChatContext, code_of
from .entry_types import chat_items, in_history
from .sessions import SessionLog
from .wire import ChatItem


def history_records(session: SessionLog) -> list[dict[str, Any]]:
    """The path to the leaf as plain dicts; tool calls carry their parsed `code`; images are
    replaced by their count so the record stays small."""
    return _records(session.path())


def history_since(session: SessionLog, since: object) -> dict[str, Any]:
    """What the kernel's `history` lacks: the records after entry `since` when it is on the
    path to the leaf (`base` is `since`), else all of them (`base` None)."""
    path = session.path()
    if isinstance(since, str):
        for index in range(len(path) - 1, -1, -1):
            if path[index]["id"] == since:
                return {"base": since, "records": _records(path[index + 1 :]), "last": _last(path)}
    return {"base": None, "records": _records(path), "last": _last(path)}


def _last(path: list[dict[str, Any]]) -> str | None:
    """The id the kernel continues from next time (the leaf, shown in history or not)."""
    return path[-1]["id"] if path else None


def _records(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries whose type the kernel's `history` lists (core/entry_types.py)."""
    records: list[dict[str, Any]] = []
    for entry in entries:
        if not in_history(entry):
            continue
        record = dict(entry)
        if entry["type"] == "assistant_message":
            record["tool_calls"] = [
                {**call, "code": code_of(call.get("arguments", ""))}
                for call in entry.get("tool_calls", [])
            ]
        if "images" in record:
            record["images"] = len(record["images"])
        records.append(record)
    return records


def chat_transcript(
    session: SessionLog, child_state: Callable[[str], tuple[str, str | None]] | None = None
) -> list[ChatItem]:
    """What the chat panel shows when it (re)opens a session: each entry's chat items as its
    type declares them (core/entry_types.py; item types in `wire.py`), in the order the panel
    showed them live. `child_state` gives a sub-agent's status and last-answer preview for its
    line.

    A cell's line comes from its `tool_result`, which is logged when the cell has finished, but
    live the line appeared when the cell started: what was logged while it ran (a sub-agent it
    spawned, a notice, an MCP call line) came after it. So the cell's items take the place of
    its `cell_started` entry."""
    context = ChatContext(child_state, price=answer_price)
    slots: list[list[ChatItem]] = []
    started: dict[str, list[ChatItem]] = {}  # tool call id -> the slot its cell's line fills
    for entry in session.path():
        call_id = entry.get("tool_call_id")
        if entry["type"] == "cell_started" and isinstance(call_id, str):
            started[call_id] = []
            slots.append(started[call_id])
            continue
        produced = chat_items(entry, context)
        if entry["type"] == "tool_result" and isinstance(call_id, str) and call_id in started:
            started.pop(call_id).extend(produced)
        else:
            slots.append(produced)
    return [item for slot in slots for item in slot]
