"""Read-only views of a session log: for the kernel's `history` and for the chat panel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .compaction import compaction_text
from .jsonfile import parse_json
from .sessions import SessionLog
from .wire import STOP_NOTICES, ChatItem

_HISTORY_TYPES = {
    "user_message",
    "assistant_message",
    "tool_result",
    "model_change",
    "turn_end",
    "error",
    "notice",
    "agent_message",
    "message_sent",
    "child_spawned",
    "compaction",
    "kernel_gc",
    "refinement",
}

_ORIGIN_FIELDS = ("from_session_id", "from_name", "relationship", "composed")


def _code_of(arguments: str) -> str | None:
    try:
        parsed = parse_json(arguments)
    except (ValueError, TypeError):
        return None
    return parsed.get("code") if isinstance(parsed, dict) else None


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
    records: list[dict[str, Any]] = []
    for entry in entries:
        if entry["type"] not in _HISTORY_TYPES:
            continue
        record = dict(entry)
        if entry["type"] == "assistant_message":
            record["tool_calls"] = [
                {**call, "code": _code_of(call.get("arguments", ""))}
                for call in entry.get("tool_calls", [])
            ]
        if "images" in record:
            record["images"] = len(record["images"])
        records.append(record)
    return records


def chat_transcript(
    session: SessionLog, child_state: Callable[[str], tuple[str, str | None]] | None = None
) -> list[ChatItem]:
    """What the chat panel shows when it (re)opens a session (types in `wire.py`).
    `child_state` gives a sub-agent's status and last-answer preview for its line."""
    items: list[ChatItem] = []
    code_by_call: dict[str, str | None] = {}
    for entry in session.path():
        kind, turn = entry["type"], entry.get("turn")
        if kind == "user_message":
            origin = {k: entry[k] for k in _ORIGIN_FIELDS if isinstance(entry.get(k), str)}
            if isinstance(entry.get("notice"), str):
                origin["notice"] = entry["notice"]
            items.append({"type": "user", "turn": turn, "text": entry["text"], **origin})  # type: ignore[typeddict-item]
        elif kind == "agent_message":
            item: dict[str, Any] = {
                "type": "agent_message",
                "turn": turn,
                "text": entry["text"],
                **{k: str(entry.get(k, "")) for k in _ORIGIN_FIELDS},
            }
            if isinstance(entry.get("notice"), str):
                item["notice"] = entry["notice"]
            items.append(item)  # type: ignore[arg-type]
        elif kind == "child_spawned":
            items.append(_child_item(entry, turn, child_state))
        elif kind == "assistant_message":
            for call in entry.get("tool_calls", []):
                code_by_call[call.get("id", "")] = _code_of(call.get("arguments", ""))
            if entry.get("text"):
                items.append({"type": "assistant", "turn": turn, "text": entry["text"]})
        elif kind == "tool_result" and entry.get("cell_id"):
            items.append(
                {
                    "type": "cell",
                    "turn": turn,
                    "cell_id": entry["cell_id"],
                    "code": code_by_call.get(entry.get("tool_call_id", "")) or "",
                    "status": entry.get("status"),
                    "execution_count": entry.get("execution_count"),
                    "preview": entry.get("preview", ""),
                }
            )
        elif kind == "error":
            items.append({"type": "error", "turn": turn, "message": entry.get("message", "")})
        elif kind == "notice":
            items.append(
                {
                    "type": "notice",
                    "turn": turn,
                    "kind": entry.get("kind", ""),
                    "text": entry.get("text", ""),
                }
            )
        elif kind == "compaction":
            text = compaction_text(entry, int(entry.get("tokens_after") or 0))
            items.append({"type": "notice", "turn": turn, "kind": "compacted", "text": text})
        elif kind == "kernel_gc":
            text = str(entry.get("text", ""))
            items.append({"type": "notice", "turn": turn, "kind": "kernel_gc", "text": text})
        elif kind == "refinement" and isinstance(entry.get("refinement"), dict):
            text = str(entry.get("text", ""))
            record = entry["refinement"]
            items.append({"type": "refinement", "turn": turn, "text": text, "refinement": record})
        elif kind == "turn_end" and entry.get("stop_reason") in STOP_NOTICES:
            items.append(
                {
                    "type": "notice",
                    "turn": turn,
                    "stop_reason": entry["stop_reason"],
                    "text": STOP_NOTICES[entry["stop_reason"]],
                }
            )
    return items


def _child_item(
    entry: dict[str, Any],
    turn: int | None,
    child_state: Callable[[str], tuple[str, str | None]] | None,
) -> ChatItem:
    child_id = str(entry.get("rlm_child_id", ""))
    item: dict[str, Any] = {
        "type": "child",
        "turn": turn,
        "rlm_child_id": child_id,
        "name": str(entry.get("name", "")),
        "notebook_path": str(entry.get("notebook_path", "")),
        "task": str(entry.get("task", "")),
    }
    if isinstance(entry.get("spawn_cell_id"), str):
        item["spawn_cell_id"] = entry["spawn_cell_id"]
    if child_state is not None and child_id:
        status, preview = child_state(child_id)
        item["status"] = status
        if preview is not None:
            item["preview"] = preview
    return item  # type: ignore[return-value]
