"""Append-only JSONL session logs, one directory per session.

`<root>/<session_id>/session.jsonl`: the first line is a header (`type: "session"`); every later
line is either a tree entry (`id`, `parent_id`, `ts`, `type`, ...) or a leaf record
(`type: "leaf"`, `leaf_id`) that moves the current position. Nothing is ever rewritten: branching
appends a leaf record, a crash-cut turn gets a `turn_end` with `stop_reason: "interrupted"`.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .messages import ImagePart, Message, ToolCall

SESSION_FILE = "session.jsonl"
FORMAT_VERSION = 1
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


class SessionError(Exception):
    pass


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_session_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def check_session_id(session_id: str) -> str:
    if not _SESSION_ID.match(session_id):
        raise SessionError(f"invalid session id {session_id!r}")
    return session_id


class SessionLog:
    """One session's log: an in-memory index over an append-only file."""

    def __init__(self, directory: Path, header: dict[str, Any]) -> None:
        self.directory = directory
        self.header = header
        self.entries: list[dict[str, Any]] = []
        self.by_id: dict[str, dict[str, Any]] = {}
        self.leaf_id: str | None = None
        self.skipped_lines: list[int] = []  # torn records found on load (line numbers)
        self._needs_newline = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------ construction

    @property
    def file(self) -> Path:
        return self.directory / SESSION_FILE

    @property
    def session_id(self) -> str:
        return str(self.header["session_id"])

    @classmethod
    def create(cls, directory: Path, header: dict[str, Any]) -> SessionLog:
        directory.mkdir(parents=True, exist_ok=False)
        full = {"type": "session", "version": FORMAT_VERSION, "created": now_iso(), **header}
        log = cls(directory, full)
        with log.file.open("x", encoding="utf-8") as f:
            f.write(json.dumps(full, ensure_ascii=False) + "\n")
        return log

    @classmethod
    def load(cls, directory: Path) -> SessionLog:
        path = directory / SESSION_FILE
        if not path.is_file():
            raise SessionError(f"no session log at {path}")
        raw = path.read_text(encoding="utf-8")
        # Only "\n" ends a record: str.splitlines() would also split inside text that holds
        # U+2028, U+2029 or \x85, which JSON leaves unescaped.
        lines = raw.split("\n")
        try:
            header = json.loads(lines[0])
        except json.JSONDecodeError:
            raise SessionError(f"{path}: the header line is not JSON") from None
        log = cls(directory, header)
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                # A crash mid-write leaves a torn line; the records around it are intact.
                log.skipped_lines.append(number)
                continue
            log._index(record)
        log._needs_newline = bool(raw) and not raw.endswith("\n")
        return log

    def _index(self, record: dict[str, Any]) -> None:
        if record.get("type") == "leaf":
            self.leaf_id = record.get("leaf_id")
            return
        self.entries.append(record)
        self.by_id[record["id"]] = record
        self.leaf_id = record["id"]

    # ------------------------------------------------------------ writing

    def append(self, entry_type: str, **fields: Any) -> dict[str, Any]:
        with self._lock:
            entry_id = secrets.token_hex(4)
            while entry_id in self.by_id:
                entry_id = secrets.token_hex(4)
            record = {
                "id": entry_id,
                "parent_id": self.leaf_id,
                "ts": now_iso(),
                "type": entry_type,
                **fields,
            }
            self._write(record)
            self._index(record)
            return record

    def move_leaf(self, entry_id: str | None) -> None:
        """Continue from an earlier entry (a branch); later appends hang off it."""
        with self._lock:
            if entry_id is not None and entry_id not in self.by_id:
                raise SessionError(f"no entry {entry_id!r} in session {self.session_id}")
            record = {"type": "leaf", "leaf_id": entry_id, "ts": now_iso()}
            self._write(record)
            self._index(record)

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        if self._needs_newline:  # end a torn last line first, so this record stands on its own
            line = "\n" + line
            self._needs_newline = False
        with self.file.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()

    # ------------------------------------------------------------ reading

    def path(self) -> list[dict[str, Any]]:
        """Entries from the root to the current leaf."""
        out: list[dict[str, Any]] = []
        cursor = self.leaf_id
        while cursor is not None:
            entry = self.by_id[cursor]
            out.append(entry)
            cursor = entry.get("parent_id")
        out.reverse()
        return out

    def turns(self) -> int:
        return sum(1 for e in self.path() if e["type"] == "user_message")

    def last_of(self, entry_type: str) -> dict[str, Any] | None:
        for entry in reversed(self.path()):
            if entry["type"] == entry_type:
                return entry
        return None

    def current_model(self) -> tuple[str, str]:
        change = self.last_of("model_change")
        source = change if change else self.header
        return str(source.get("provider", "")), str(source.get("model", ""))

    def open_turn(self) -> int | None:
        """The turn whose `turn_end` is missing (cut by a crash), if any."""
        turn: int | None = None
        for entry in self.path():
            if entry["type"] == "user_message":
                turn = entry.get("turn")
            elif entry["type"] == "turn_end":
                turn = None
        return turn

    def unfinished_cells(self) -> list[dict[str, Any]]:
        """`cell_started` entries of the open turn whose call has no `tool_result`: cells that
        were running when the process stopped."""
        if self.open_turn() is None:
            return []
        started: dict[str, dict[str, Any]] = {}
        for entry in self.path():
            if entry["type"] == "user_message":
                started.clear()
            elif entry["type"] == "cell_started":
                started[entry.get("tool_call_id", "")] = entry
            elif entry["type"] == "tool_result":
                started.pop(entry.get("tool_call_id", ""), None)
        return list(started.values())

    def close_interrupted_turn(self) -> int | None:
        """Mark a turn cut by a crash as interrupted (never replayed). Returns its number."""
        turn = self.open_turn()
        if turn is not None:
            self.append(
                "turn_end",
                turn=turn,
                stop_reason="interrupted",
                final_text="",
                note="the server stopped while this turn was running",
            )
        return turn

    def context_messages(self) -> list[Message]:
        """The conversation the model sees, rebuilt from the path to the leaf.

        Every tool call gets exactly one result: calls whose result was never recorded (a stopped
        or crashed turn) get a synthetic one, so every provider accepts the history.
        """
        messages: list[Message] = []
        pending: list[ToolCall] = []

        def settle() -> None:
            for call in pending:
                messages.append(
                    Message(
                        role="tool",
                        tool_call_id=call.id,
                        text="(this call was not run: the turn was stopped before it)",
                    )
                )
            pending.clear()

        for entry in self.path():
            kind = entry["type"]
            if kind == "user_message":
                settle()
                messages.append(Message(role="user", text=entry["text"]))
            elif kind == "assistant_message":
                settle()
                calls = tuple(ToolCall(**c) for c in entry.get("tool_calls", []))
                messages.append(
                    Message(role="assistant", text=entry.get("text", ""), tool_calls=calls)
                )
                pending.extend(calls)
            elif kind == "tool_result":
                call_id = entry["tool_call_id"]
                if any(c.id == call_id for c in pending):
                    pending[:] = [c for c in pending if c.id != call_id]
                    images = tuple(ImagePart(**i) for i in entry.get("images", []))
                    messages.append(
                        Message(
                            role="tool",
                            tool_call_id=call_id,
                            text=entry.get("observation", ""),
                            images=images,
                        )
                    )
        settle()
        return messages


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    notebook_path: str
    provider: str
    model: str
    created: str
    updated: str
    turns: int


class SessionRepository:
    """All sessions under one root directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._summaries: dict[Path, tuple[tuple[float, int], SessionSummary]] = {}

    def directory(self, session_id: str) -> Path:
        return self.root / check_session_id(session_id)

    def create(self, **header: Any) -> SessionLog:
        session_id = new_session_id()
        while self.directory(session_id).exists():
            session_id = new_session_id()
        return SessionLog.create(self.directory(session_id), {"session_id": session_id, **header})

    def load(self, session_id: str) -> SessionLog:
        directory = self.directory(session_id)
        if not directory.is_dir():
            raise SessionError(f"no session {session_id!r}")
        return SessionLog.load(directory)

    def exists(self, session_id: str) -> bool:
        try:
            return (self.directory(session_id) / SESSION_FILE).is_file()
        except SessionError:
            return False

    def _headers(self) -> Iterator[tuple[dict[str, Any], Path]]:
        for child in self.root.iterdir():
            file = child / SESSION_FILE
            if not file.is_file():
                continue
            with file.open(encoding="utf-8") as f:
                first = f.readline()
            try:
                header = json.loads(first)
            except json.JSONDecodeError:
                continue
            yield header, file

    def summaries(self) -> list[SessionSummary]:
        """One summary per session, newest first; a log is only re-read when its file changed."""
        out = []
        for _header, file in self._headers():
            stat = file.stat()
            stamp = (stat.st_mtime, stat.st_size)
            cached = self._summaries.get(file)
            if cached is not None and cached[0] == stamp:
                out.append(cached[1])
                continue
            log = SessionLog.load(file.parent)
            provider, model = log.current_model()
            updated = log.entries[-1]["ts"] if log.entries else log.header.get("created", "")
            out.append(
                SessionSummary(
                    session_id=log.session_id,
                    notebook_path=str(log.header.get("notebook_path", "")),
                    provider=provider,
                    model=model,
                    created=str(log.header.get("created", "")),
                    updated=str(updated),
                    turns=log.turns(),
                )
            )
            self._summaries[file] = (stamp, out[-1])
        out.sort(key=lambda s: s.updated, reverse=True)
        return out

    def latest_for_notebook(self, notebook_path: str) -> str | None:
        best: tuple[float, str] | None = None
        for header, file in self._headers():
            if header.get("notebook_path") != notebook_path:
                continue
            mtime = os.path.getmtime(file)
            if best is None or mtime > best[0]:
                best = (mtime, str(header["session_id"]))
        return best[1] if best else None
