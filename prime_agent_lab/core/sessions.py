"""Append-only JSONL session logs, one directory per session.

`<root>/<session_id>/session.jsonl`: the first line is a header (`type: "session"`); every later
line is either a tree entry (`id`, `parent_id`, `ts`, `type`, ...) or a leaf record
(`type: "leaf"`, `leaf_id`) that moves the current position. Nothing is ever rewritten: branching
appends a leaf record, a crash-cut turn gets a `turn_end` with `stop_reason: "interrupted"`.

Size: over 600 lines because the log's reading (migration, damage, blobs), writing and the
model's context built from it keep one in-memory tree consistent; entry types live in
`entry_types.py`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .entry_schema import SUMMARY_LABEL as SUMMARY_LABEL
from .entry_schema import Seen
from .entry_schema import summary_message as summary_message
from .entry_types import check_new, problem, seen, turn_boundary
from .file_memo import FileMemo, stamp_of
from .jsonfile import (
    MAX_BLOB_BYTES,
    MAX_SESSION_LOG_BYTES,
    BadJson,
    UnreadableFile,
    parse_json,
    read_bytes,
)
from .messages import ImagePart, Message, ToolCall
from .text import json_type, shorten
from .whole_writes import append_whole, is_disk_full, replace_whole

SESSION_FILE = "session.jsonl"
FORMAT_VERSION = 2
"""2: images of tool results are files in `blobs/` named by their hash (`{"media_type", "blob"}`)
instead of inline base64. A version-1 log is migrated in memory on load (`_MIGRATIONS`); the file
is never rewritten, and its inline images still load."""
BLOBS = "blobs"
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/svg+xml": "svg"}
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


class SessionError(Exception):
    pass


class SessionWriteError(SessionError):
    """A record could not be written (a full disk, most often). Nothing of it is in the file and
    the log's position did not move, so the session goes on from its last written entry once
    the cause is gone."""

    def __init__(self, session_id: str, file: Path, cause: OSError) -> None:
        full = is_disk_full(cause)
        what = "the disk is full" if full else "the file could not be written"
        again = "there is room again" if full else "it can be written again"
        super().__init__(
            f"the session log of {session_id} could not be written ({what}: "
            f"{cause.strerror or cause}, {file}); nothing was lost before this, and the "
            f"session continues from its last written entry once {again}"
        )
        self.session_id = session_id
        self.cause = cause
        self.disk_full = is_disk_full(cause)


class LinkedSession(SessionError):
    """A session folder that is a symbolic link: never read, continued, written or removed
    through (docs/trust.md, "Symbolic links"); its target is not the session's."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id} is a link, not a folder: a linked session folder is never "
            "followed; remove it by hand"
        )
        self.session_id = session_id


class BrokenSession(SessionError):
    """A session whose log is damaged: it is listed, never continued, never rewritten."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"session {session_id} cannot be continued: {reason}")
        self.session_id = session_id
        self.reason = reason


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_session_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def is_session_id(name: object) -> bool:
    return isinstance(name, str) and _SESSION_ID.fullmatch(name) is not None


def check_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise SessionError(f"invalid session id {shorten(session_id)}")
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
        self.orphaned_lines: list[int] = []  # entries below a torn record, skipped on load
        self.damage: str | None = None  # why this log cannot be continued (see `read`)
        self._lock = threading.Lock()
        self._context: _ContextBuilder | None = None
        self.format_version = FORMAT_VERSION  # of the file as written (see `read`)

    # ------------------------------------------------------------ construction

    @property
    def file(self) -> Path:
        return self.directory / SESSION_FILE

    @property
    def session_id(self) -> str:
        """The directory's name: a loaded header must agree with it (see `read`)."""
        return self.directory.name

    @property
    def notebook_path(self) -> str:
        """Where the notebook is now: the header's path, or the last `notebook_moved` entry's."""
        for entry in reversed(self.entries):
            if entry.get("type") == "notebook_moved" and isinstance(entry.get("path"), str):
                return str(entry["path"])
        return str(self.header.get("notebook_path", ""))

    @classmethod
    def create(cls, directory: Path, header: dict[str, Any]) -> SessionLog:
        directory.mkdir(parents=True, exist_ok=False)
        full = {"type": "session", "version": FORMAT_VERSION, "created": now_iso(), **header}
        log = cls(directory, full)
        try:
            append_whole(log.file, (json.dumps(full, ensure_ascii=False) + "\n").encode())
        except OSError as exc:  # a session without its header would be listed broken forever
            shutil.rmtree(directory, ignore_errors=True)
            raise SessionWriteError(log.session_id, log.file, exc) from exc
        return log

    @classmethod
    def load(cls, directory: Path) -> SessionLog:
        """A log that can be continued; raises BrokenSession when it is damaged."""
        log = cls.read(directory)
        if log.damage is not None:
            raise BrokenSession(directory.name, log.damage)
        return log

    @classmethod
    def read(cls, directory: Path) -> SessionLog:
        """`_read`, with any damage said of the file (`session.jsonl: line 3: ...`)."""
        log = cls._read(directory)
        if log.damage is not None and not log.damage.startswith(SESSION_FILE):
            log.damage = f"{SESSION_FILE}: {log.damage}"
        return log

    @classmethod
    def _read(cls, directory: Path) -> SessionLog:
        """Everything that can be read, without raising for what the file holds.

        Lines that are not UTF-8 JSON are torn writes (a crash mid-write): skipped, as the records
        around them are intact. A torn line that ends with a whole record (an older version
        appended the next record right after a write the disk cut short) gives that record back.
        After a torn line, an entry hanging off an unknown entry (its parent was in the torn
        line) is skipped with everything below it, and the session goes on from the entries
        that were read whole. Anything else that does not fit (a file that cannot be read or is
        too large, a header that is not this session's, a line nested too deeply or holding a
        number out of range, a line that is not an object, an entry without an id, or hanging
        off an unknown one with no torn line to explain it) is damage: `damage` says where and
        why, and only the entries before it are indexed (core/jsonfile.py reads the file).
        """
        log = cls(directory, {})
        try:
            raw = read_bytes(directory / SESSION_FILE, MAX_SESSION_LOG_BYTES)
        except UnreadableFile as exc:  # missing, a pipe or directory, too large, ...
            log.damage = f"{SESSION_FILE} {exc.reason}"
            return log
        # Only "\n" ends a record: str.splitlines() would also split inside text that holds
        # U+2028, U+2029 or \x85, which JSON leaves unescaped.
        lines = raw.split(b"\n")
        header, log.damage = _parse_header(lines[0], directory.name)
        if log.damage is not None:
            log.header = header or {}
            return log
        log.header = header
        log.format_version, log.damage = _migrate_header(header)
        if log.damage is not None:
            return log
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                record = parse_json(line)
            except BadJson as exc:
                if not exc.torn:  # valid JSON past a limit: damage, not a torn write
                    log.damage = f"line {number} {exc.reason}"
                    break
                log.skipped_lines.append(number)
                record = _record_after_a_torn_write(line)
                if record is None or log._problem(record) is not None:
                    continue  # only a record that fits the tree is taken from a torn line
            problem = log._problem(record)
            if problem is not None and log.skipped_lines and log._hangs_off_unknown(record):
                log.orphaned_lines.append(number)
                continue
            if problem is not None:
                log.damage = f"line {number}: {problem}"
                break
            log._index(record)
        return log

    def _problem(self, record: Any) -> str | None:
        """Why `record` cannot join this log's tree, or None when it can."""
        if not isinstance(record, dict):
            return f"{json_type(record)} where a record (a JSON object) belongs"
        if record.get("type") == "leaf":
            leaf = record.get("leaf_id")
            if leaf is not None and not isinstance(leaf, str):
                return f"the position moves to {json_type(leaf)}, not an entry id"
            if leaf is not None and leaf not in self.by_id:
                return f"the position moves to an unknown entry {shorten(leaf)}"
            return None
        entry_id, parent = record.get("id"), record.get("parent_id")
        if not isinstance(entry_id, str) or not entry_id:
            return "an entry without an id"
        if entry_id in self.by_id:
            return f"a second entry with the id {shorten(entry_id)}"
        if not isinstance(record.get("type"), str):
            return f"entry {shorten(entry_id)} has no type"
        if parent is not None and not isinstance(parent, str):
            return f"entry {shorten(entry_id)} has {json_type(parent)} as its parent_id"
        if parent is not None and parent not in self.by_id:
            return f"entry {shorten(entry_id)} hangs off an unknown entry {shorten(parent)}"
        return problem(record) or self._compaction_problem(record)

    def _hangs_off_unknown(self, record: Any) -> bool:
        """An entry whose parent, or a leaf record whose entry, this log does not hold."""
        if not isinstance(record, dict):
            return False
        target = record.get("leaf_id" if record.get("type") == "leaf" else "parent_id")
        return target is not None and target not in self.by_id

    def _compaction_problem(self, record: dict[str, Any]) -> str | None:
        """A compaction must keep from an entry on its own branch: otherwise the context
        rebuilt from it would silently lose the part it claims to keep verbatim."""
        if record["type"] != "compaction":
            return None
        first_kept = record.get("first_kept_entry_id")
        cursor = record.get("parent_id")
        while cursor is not None and cursor != first_kept:
            cursor = self.by_id[cursor].get("parent_id")
        if cursor is None:
            return (
                f"compaction {shorten(record['id'])} keeps from {shorten(first_kept)}, "
                "which is not an earlier entry of its branch"
            )
        return None

    def _index(self, record: dict[str, Any]) -> None:
        if record.get("type") == "leaf":
            self.leaf_id = record.get("leaf_id")
            return
        self.entries.append(record)
        self.by_id[record["id"]] = record
        self.leaf_id = record["id"]

    # ------------------------------------------------------------ writing

    def append(self, entry_type: str, **fields: Any) -> dict[str, Any]:
        """Write one entry of a declared type (core/entry_types.py). Only a record that loads
        back is written: a type or field that is not declared, or a field of the wrong type,
        raises UndeclaredEntry, a compaction that keeps from off its branch SessionError."""
        check_new(entry_type, fields)
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
            problem = self._compaction_problem(record)
            if problem is not None:
                raise SessionError(f"not written: {problem}")
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
        """The record whole, or a SessionWriteError and nothing of it in the file. Callers index
        the record only after this returns, so no later entry can hang off a missing one."""
        try:  # NaN or infinity would be written and never read back (core/jsonfile.py)
            line = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode()
        except ValueError as exc:
            raise SessionError(f"not written: {record.get('type')} {exc}") from None
        try:
            append_whole(self.file, line)
        except OSError as exc:
            raise SessionWriteError(self.session_id, self.file, exc) from exc

    def store_image(self, media_type: str, data_base64: str) -> dict[str, Any]:
        """An image of a tool result as the entry references it: written once to
        `blobs/<sha256>.<ext>` (atomically; the same image again is not written twice)."""
        try:
            data = base64.b64decode(data_base64, validate=True)
        except (binascii.Error, ValueError):
            return {"media_type": media_type, "data_base64": data_base64}  # kept as it came
        name = f"{hashlib.sha256(data).hexdigest()}.{_EXTENSIONS.get(media_type, 'bin')}"
        target = self.directory / BLOBS / name
        if not target.exists():
            try:
                target.parent.mkdir(exist_ok=True)
                replace_whole(target, data)
            except OSError as exc:
                raise SessionWriteError(self.session_id, target, exc) from exc
        return {"media_type": media_type, "blob": name, "bytes": len(data)}

    def image_data(self, image: dict[str, Any]) -> str | None:
        """The base64 data of an entry's image (inline in version 1, a blob since version 2);
        None when its blob is missing or its bytes no longer match its hash name (a provider
        would refuse a broken image in every later request)."""
        if isinstance(image.get("data_base64"), str):
            return str(image["data_base64"])
        name = str(image["blob"])
        try:
            data = read_bytes(self.directory / BLOBS / name, MAX_BLOB_BYTES)
        except UnreadableFile:  # missing, a pipe, too large: the model is told it is missing
            return None
        if hashlib.sha256(data).hexdigest() != name.split(".")[0]:
            return None
        return base64.b64encode(data).decode()

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

    def updated(self) -> str:
        """When the session last changed: its newest entry's time, else its creation time. A
        line without a readable time (a log from elsewhere) is passed over, not a crash."""
        for entry in reversed(self.entries):
            if isinstance(entry.get("ts"), str):
                return str(entry["ts"])
        return str(self.header.get("created") or "")

    def last_of(self, entry_type: str) -> dict[str, Any] | None:
        for entry in reversed(self.path()):
            if entry["type"] == entry_type:
                return entry
        return None

    def current_model(self) -> tuple[str, str]:
        change = self.last_of("model_change")
        source = change if change else self.header
        return _text(source.get("provider")), _text(source.get("model"))

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

    def close_interrupted_turn(
        self, note: str = "the server stopped while this turn was running"
    ) -> int | None:
        """Mark a turn cut by a crash as interrupted (never replayed). Returns its number."""
        turn = self.open_turn()
        if turn is not None:
            self.append("turn_end", turn=turn, stop_reason="interrupted", final_text="", note=note)
        return turn

    def context_messages(self) -> list[Message]:
        """The conversation the model sees: the path to the leaf, as messages.

        Built incrementally: entries appended since the last call extend the previous result
        (a leaf moved elsewhere, a branch, rebuilds it), so a model call costs the same at the
        200th cell as at the first. Every tool call gets exactly one result: calls whose result
        was never recorded (a stopped or crashed turn) get a synthetic one, so every provider
        accepts the history.
        """
        builder = self._context
        new = self._entries_after(builder.leaf_id) if builder is not None else None
        if new is not None and any(e["type"] == "compaction" for e in new):
            new = None  # a compaction replaces the prefix: rebuild from its summary
        if builder is None or new is None:
            compaction, new = self.context_entries()
            builder = _ContextBuilder(
                self.image_data, self.in_turn_before(new[0]) if new else False
            )
            if compaction is not None:
                builder.feed(compaction)
        for entry in new:
            builder.feed(entry)
        builder.leaf_id = self.leaf_id
        self._context = builder
        return builder.messages_now()

    def context_entries(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The latest compaction on the path to the leaf (None: never compacted) and the entries
        the model still sees: from that compaction's first kept entry to the leaf, compaction
        entries left out (the summary stands for what they dropped)."""
        path = self.path()
        compacted = [i for i, e in enumerate(path) if e["type"] == "compaction"]
        at = compacted[-1] if compacted else None
        if at is None:
            return None, path
        compaction = path[at]
        first_kept = compaction.get("first_kept_entry_id")
        start = next((i for i in range(at) if path[i]["id"] == first_kept), at)
        kept = [e for e in path[start:] if e["type"] != "compaction"]
        return compaction, kept

    def in_turn_before(self, entry: dict[str, Any]) -> bool:
        """Whether `entry` is inside a turn: after a turn's opening entry and before its end on
        the path (a compaction in between changes nothing). Walks back to the nearest one."""
        return self.in_turn_after(entry.get("parent_id"))

    def in_turn_after(self, entry_id: str | None) -> bool:
        """Whether the context is inside a turn right after entry `entry_id` (None: the root)."""
        cursor = entry_id
        while cursor is not None:
            entry = self.by_id[cursor]
            boundary = turn_boundary(entry)
            if boundary is not None:
                return boundary
            cursor = entry.get("parent_id")
        return False

    def _entries_after(self, entry_id: str | None) -> list[dict[str, Any]] | None:
        """The entries from `entry_id` (exclusive) to the leaf, or None if it is not on the path."""
        out: list[dict[str, Any]] = []
        cursor = self.leaf_id
        while cursor != entry_id:
            if cursor is None:
                return None
            entry = self.by_id[cursor]
            out.append(entry)
            cursor = entry.get("parent_id")
        out.reverse()
        return out

    def adopt(self, records: list[dict[str, Any]]) -> None:
        """Copy entries of another log as they are (ids, parents): a fork or a clone
        (core/branching.py). Each must fit this log's tree, as on load."""
        with self._lock:
            for record in records:
                problem = self._problem(record)
                if problem is not None:
                    raise SessionError(f"cannot copy into {self.session_id}: {problem}")
                self._write(record)
                self._index(record)


class _ContextBuilder:
    """The model's conversation, fed one session entry at a time (see `context_messages`).
    What the model reads of an entry is declared with its type (`entry_types.seen`)."""

    NOT_RUN = "(this call was not run: the turn was stopped before it)"

    def __init__(
        self, image_data: Callable[[dict[str, Any]], str | None], in_turn: bool = False
    ) -> None:
        self.image_data = image_data
        self.leaf_id: str | None = None
        self.messages: list[Message] = []
        self.pending: list[ToolCall] = []  # calls of the last assistant message without result
        self.waiting: list[str] = []  # read with the next turn's message (notices between turns)
        self.in_turn = in_turn
        # A compaction's summary opens the conversation; a user message right after it joins it
        # (two user messages in a row are refused by some providers).
        self.summary: str | None = None

    def feed(self, entry: dict[str, Any]) -> None:
        for part in seen(entry, self.in_turn):
            self._take(part)
        boundary = turn_boundary(entry)
        if boundary is not None:
            self.in_turn = boundary

    def _take(self, part: Seen) -> None:
        if part.when == "before_next_turn":
            self.waiting.append(part.text)
        elif part.role == "tool":
            self._tool_result(part)
        elif part.role == "assistant":
            self._settle()
            self.messages.append(
                Message(role="assistant", text=part.text, tool_calls=part.tool_calls)
            )
            self.pending.extend(part.tool_calls)
        elif part.when == "opens_context":
            self._settle()
            self.summary = part.text
            self.messages.append(Message(role="user", text=part.text))
        elif part.when == "opens_turn":
            self._settle()
            text = "".join(self.waiting) + part.text
            self.waiting.clear()
            self._user(text)
        else:
            self._settle()
            self._user(part.text)

    def _tool_result(self, part: Seen) -> None:
        call_id = part.tool_call_id
        if not any(c.id == call_id for c in self.pending):
            return
        self.pending[:] = [c for c in self.pending if c.id != call_id]
        images, missing = [], []
        for image in part.images:
            data = self.image_data(dict(image))
            if data is None:
                missing.append(str(image.get("blob")))
            else:
                images.append(ImagePart(media_type=image["media_type"], data_base64=data))
        text = part.text
        if missing:
            text += f"\n[{len(missing)} image(s) of this output are missing on disk]"
        self.messages.append(
            Message(role="tool", tool_call_id=call_id, text=text, images=tuple(images))
        )

    def _user(self, text: str) -> None:
        if len(self.messages) == 1 and self.summary is not None:
            self.messages.clear()  # only the summary so far: this message joins it
            text = f"{self.summary}\n\n{text}"
        self.messages.append(Message(role="user", text=text))

    def _settle(self) -> None:
        self.messages.extend(self._not_run())
        self.pending.clear()

    def _not_run(self) -> list[Message]:
        return [Message(role="tool", tool_call_id=c.id, text=self.NOT_RUN) for c in self.pending]

    def messages_now(self) -> list[Message]:
        """The messages so far, with the calls still open settled (without changing state)."""
        return [*self.messages, *self._not_run()]


_GLUED_CANDIDATES = 64
_RECORD_STARTS = (b'{"id": ', b'{"type": "leaf"')


def _record_after_a_torn_write(line: bytes) -> dict[str, Any] | None:
    """The whole record at the end of a torn line, if there is one.

    Before appends were cut back on failure, a write the disk cut short left a partial line, and
    the next record was appended right after it on the same line. In JSON a raw `{"` only opens
    an object (quotes inside strings are escaped), so the record is the last `{"` that starts
    like a record and from which the rest of the line is one JSON object (nested objects of that
    record are followed by its closing brace and never parse alone). The caller takes it only if
    it fits the tree: a line cut right after a nested object gives that object, which does not."""
    end = len(line)
    for _ in range(_GLUED_CANDIDATES):
        start = line.rfind(b'{"', 0, end)
        if start <= 0:
            return None
        end = start
        if not line.startswith(_RECORD_STARTS, start):  # a nested object, as `append` writes
            continue
        try:
            record = parse_json(line[start:])
        except BadJson:
            continue
        return record if isinstance(record, dict) else None
    return None


def _parse_header(line: bytes, directory_name: str) -> tuple[dict[str, Any] | None, str | None]:
    """The header and None, or what can be read of it and why it is not this session's."""
    if not line.strip():
        return None, f"{SESSION_FILE} is empty (no header line)"
    try:
        header = parse_json(line)
    except BadJson as exc:
        return None, f"the header line {exc.reason}"
    if not isinstance(header, dict):
        return None, f"the header is {json_type(header)}, not a JSON object"
    if header.get("type") != "session":
        return header, "the first line is not a session header"
    session_id = header.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return header, "the header has no session_id"
    if session_id != directory_name:
        return header, (
            f"the header names session {shorten(session_id)}, not its directory "
            f"{directory_name!r} (a copied directory?)"
        )
    return header, None


def _from_version_1(header: dict[str, Any]) -> None:
    """Version 1 records are valid version 2 records (inline images are still read); only the
    header says where the log came from."""
    header["migrated_from"] = header.get("migrated_from", 1)


_MIGRATIONS = {1: _from_version_1}
"""Version n -> the in-memory step to version n + 1."""


def _migrate_header(header: dict[str, Any]) -> tuple[int, str | None]:
    """The file's format version, the header migrated in memory to FORMAT_VERSION; or why the
    log cannot be read (written by a newer version)."""
    version = header.get("version", 1)
    if not isinstance(version, int) or version < 1:
        return 1, f"the header's version {shorten(version)} is not a format version"
    if version > FORMAT_VERSION:
        return version, (
            f"written by a newer Prime Agent Lab (session format {version}; this one reads up "
            f"to {FORMAT_VERSION})"
        )
    for step in range(version, FORMAT_VERSION):
        _MIGRATIONS[step](header)
    header["version"] = FORMAT_VERSION
    return version, None


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    notebook_path: str
    provider: str
    model: str
    created: str
    updated: str
    turns: int
    broken: str | None = None  # why the session cannot be continued (None: it can)
    modified: float = 0.0  # the log's mtime: which session of a notebook is the newest


class SessionRepository:
    """All sessions under one root directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._summaries = FileMemo(_summary_of)
        self._peeks = FileMemo(peek_log)

    def directory(self, session_id: str) -> Path:
        return self.root / check_session_id(session_id)

    def create(self, **header: Any) -> SessionLog:
        session_id = new_session_id()
        while self.directory(session_id).exists():
            session_id = new_session_id()
        return SessionLog.create(self.directory(session_id), {"session_id": session_id, **header})

    def load(self, session_id: str) -> SessionLog:
        """A session to continue. Raises SessionError (BrokenSession when it is damaged,
        LinkedSession when its folder is a link)."""
        return SessionLog.load(self._folder(session_id))

    def read(self, session_id: str) -> SessionLog:
        """What can be read of a session, damaged or not (`damage` says which)."""
        return SessionLog.read(self._folder(session_id))

    def _folder(self, session_id: str) -> Path:
        """The session's folder: a real directory, never a link (LinkedSession)."""
        directory = self.directory(session_id)
        if directory.is_symlink():
            raise LinkedSession(session_id)
        if not directory.is_dir():
            raise SessionError(f"no session {session_id!r}")
        return directory

    def exists(self, session_id: str) -> bool:
        try:
            return (self.directory(session_id) / SESSION_FILE).is_file()
        except SessionError:
            return False

    def delete(self, session_id: str) -> None:
        """Remove a session's directory and everything in it (snapshots, mail, schedules).
        Only a real directory directly under the root, named like a session: never a link
        (whose target is not the session's to lose)."""
        directory = self._folder(session_id)
        shutil.rmtree(directory)
        self._summaries.forget(directory / SESSION_FILE)
        self._peeks.forget(directory / SESSION_FILE)

    def session_directories(self) -> Iterator[Path]:
        """Directories named like a session; the name is the id (a header never names a path).
        A link is none: it is never followed."""
        for child in self.root.iterdir():
            if _SESSION_ID.fullmatch(child.name) and child.is_dir() and not child.is_symlink():
                yield child

    def summaries(self, notebook_path: str | None = None) -> list[SessionSummary]:
        """One summary per session (only those of `notebook_path`, when given), damaged ones
        included, newest first.

        A log is only re-read when its file changed. With a notebook, only that notebook's logs
        are read whole (`peek` tells them by their header); this reads files: call it off the
        event loop.
        """
        directories = list(self.session_directories())
        self._peeks.keep_only(d / SESSION_FILE for d in directories)
        self._summaries.keep_only(d / SESSION_FILE for d in directories)
        if notebook_path is not None:
            directories = [d for d in directories if self.may_belong(d, notebook_path)]
        out = [self._summaries.get(directory / SESSION_FILE) for directory in directories]
        if notebook_path is not None:
            out = [s for s in out if s.notebook_path == notebook_path]
        out.sort(key=lambda s: s.updated, reverse=True)
        return out

    def peek(self, directory: Path) -> HeaderPeek | None:
        """`peek_log` of a session directory, cached until its log changes."""
        return self._peeks.get(directory / SESSION_FILE)

    def may_belong(self, directory: Path, notebook_path: str) -> bool:
        """Whether the session in `directory` may be one of `notebook_path`'s: its header says
        so, it may have moved there, or only reading it whole can tell."""
        found = self.peek(directory)
        return found is None or found.moved or found.notebook_path == notebook_path

    def unreadable_newer(self, notebook_path: str, than: str | None) -> list[SessionSummary]:
        """Damaged sessions of a notebook newer than session `than` (all of them for None):
        what `latest_for_notebook` skipped, which the user must hear of."""
        summaries = self.summaries(notebook_path)
        chosen = next((s.modified for s in summaries if s.session_id == than), None)
        return [
            s for s in summaries if s.broken is not None and (chosen is None or s.modified > chosen)
        ]

    def latest_for_notebook(self, notebook_path: str) -> str | None:
        """The newest session of a notebook that can be continued (damaged ones are skipped)."""
        candidates = [s for s in self.summaries(notebook_path) if s.broken is None]
        best = max(candidates, key=lambda s: s.modified, default=None)
        return best.session_id if best else None


@dataclass(frozen=True)
class HeaderPeek:
    """What a session log says of itself without being read whole."""

    notebook_path: str  # the header's notebook
    parent_session_id: str | None  # the header's parent (a sub-agent's)
    moved: bool  # the log may hold a `notebook_moved` entry: only reading it whole tells where


_MOVED = b"notebook_moved"


def peek_log(file: Path) -> HeaderPeek | None:
    """The header of `file` (a session log) and whether its notebook may have moved, from its
    bytes and header line alone; None when only a full read can say (no file, a file too large,
    a damaged header: `SessionLog.read` then says why). A log that spells the entry type with
    JSON escapes is taken for unmoved: it only lists that session under its first notebook."""
    try:
        raw = read_bytes(file, MAX_SESSION_LOG_BYTES)
    except UnreadableFile:
        return None
    first = raw.partition(b"\n")[0]
    header, damage = _parse_header(first, file.parent.name)
    if header is None or damage is not None:
        return None
    notebook, parent = header.get("notebook_path"), header.get("parent_session_id")
    return HeaderPeek(
        notebook_path=notebook if isinstance(notebook, str) else "",
        parent_session_id=parent if isinstance(parent, str) else None,
        moved=_MOVED in raw,
    )


def _summary_of(file: Path) -> SessionSummary:
    stamp = stamp_of(file)
    return _summarize(SessionLog.read(file.parent), 0.0 if stamp is None else stamp[2] / 1e9)


def _summarize(log: SessionLog, modified: float) -> SessionSummary:
    header = log.header
    provider, model = log.current_model()
    created = _text(header.get("created"))
    updated = _text(log.entries[-1].get("ts")) if log.entries else created
    return SessionSummary(
        session_id=log.session_id,
        notebook_path=log.notebook_path,
        provider=provider,
        model=model,
        created=created,
        updated=updated,
        turns=log.turns(),
        broken=log.damage,
        modified=modified,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
