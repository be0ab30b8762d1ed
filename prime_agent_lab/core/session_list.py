"""The session list of a notebook (`GET .../sessions?notebook=`, `prime-agent-lab sessions`).

Each session on disk with its title (its first user message), times, model, status and cost,
its own and with its sub-agents' (a sub-agent's header names its parent, core/family.py).
Logs are read the way every session log is (core/jsonfile.py: bounded in size, depth and
numbers), so a file that cannot be read, is too large or is damaged is listed `broken` with the
reason; nothing a file holds makes the list fail. A log is read again only when its file
changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from .file_memo import FileMemo
from .sessions import SESSION_FILE, LinkedSession, SessionLog, is_session_id, peek_log
from .text import preview
from .usage import session_cost
from .wire import SessionListItem

TITLE_CHARS = 80


@dataclass(frozen=True)
class StoredSession:
    """What the list shows of one session directory, as read from disk."""

    session_id: str
    notebook_path: str
    title: str | None
    created: str
    updated: str
    provider: str
    model: str
    turns: int
    parent_session_id: str | None
    name: str
    cost: float | None
    broken: str | None  # why the log cannot be continued (None: it can)
    last_user_entry_id: str | None = None  # where the panel's Fork starts from


@dataclass(frozen=True)
class LiveSession:
    """An agent loaded in the server on that session (the host knows, the disk does not)."""

    status: Literal["running", "idle"]
    notebook_path: str
    provider: str
    model: str


class SessionCatalog:
    """The sessions under one root directory, each summarized once per change of its file."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._summaries = FileMemo(lambda file: summarize(file.parent))
        self._peeks = FileMemo(peek_log)

    def stored(
        self, notebook: str | None = None, live: Mapping[str, LiveSession] | None = None
    ) -> list[StoredSession]:
        """Every session directory's summary (damaged ones included); with `notebook`, only
        those that may be its sessions and their sub-agents' (the rest are told apart by their
        header alone, never read whole). Reads changed logs whole: call it off the event loop."""
        try:
            directories = [
                child
                for child in self.root.iterdir()
                if is_session_id(child.name) and child.is_dir()
            ]
        except OSError:  # no sessions yet (or the folder cannot be listed)
            return []
        files = [d / SESSION_FILE for d in directories]
        self._summaries.keep_only(files)  # forget deleted sessions
        self._peeks.keep_only(files)
        if notebook is not None:
            directories = self._of_notebook(directories, notebook, live or {})
        return [self._summaries.get(d / SESSION_FILE) for d in directories]

    def _of_notebook(
        self, directories: list[Path], notebook: str, live: Mapping[str, LiveSession]
    ) -> list[Path]:
        """The directories whose sessions may be `notebook`'s (by header, a possible move, a live
        agent there, or a header only a full read can judge), with all their sub-agents'. A
        linked folder is never read through: it is listed from its name alone (as broken)."""
        peeks = {
            d.name: None if d.is_symlink() else self._peeks.get(d / SESSION_FILE)
            for d in directories
        }
        chosen = {
            name
            for name, found in peeks.items()
            if found is None
            or found.moved
            or found.notebook_path == notebook
            or (name in live and live[name].notebook_path == notebook)
        }
        children: dict[str, list[str]] = {}
        for name, found in peeks.items():
            if found is not None and found.parent_session_id is not None:
                children.setdefault(found.parent_session_id, []).append(name)
        pending = list(chosen)
        while pending:
            for child in children.get(pending.pop(), ()):
                if child not in chosen:
                    chosen.add(child)
                    pending.append(child)
        return [d for d in directories if d.name in chosen]

    def listing(
        self, notebook: str | None = None, live: Mapping[str, LiveSession] | None = None
    ) -> list[SessionListItem]:
        """`session_list` of the sessions on disk now."""
        return session_list(self.stored(notebook, live), notebook, live)


def summarize(directory: Path) -> StoredSession:
    """One session directory as the list shows it; never raises for what the files hold.
    A linked folder is listed broken, unread (its target is not the session's)."""
    try:
        if directory.is_symlink():
            return _broken(directory, str(LinkedSession(directory.name)))
        return _from_log(SessionLog.read(directory))
    except Exception as exc:  # one hostile file must not take the whole list down
        return _broken(
            directory, f"{SESSION_FILE} cannot be summarized ({type(exc).__name__}: {exc})"
        )


def _broken(directory: Path, reason: str) -> StoredSession:
    return StoredSession(
        session_id=directory.name,
        notebook_path="",
        title=None,
        created="",
        updated="",
        provider="",
        model="",
        turns=0,
        parent_session_id=None,
        name="",
        cost=None,
        broken=reason[:500],
    )


def _from_log(log: SessionLog) -> StoredSession:
    header = log.header
    provider, model = log.current_model()
    created = _text(header.get("created"))
    parent = header.get("parent_session_id")
    return StoredSession(
        session_id=log.session_id,
        notebook_path=log.notebook_path,
        title=title_of(log.entries),
        created=created,
        updated=log.updated() or _modified(log.file),
        provider=provider,
        model=model,
        turns=log.turns(),
        parent_session_id=parent if is_session_id(parent) else None,
        name=_text(header.get("name")) if parent else "",
        cost=session_cost(log),  # unknown when a figure is not a token count
        broken=log.damage,
        last_user_entry_id=last_user_entry_id(log),
    )


def title_of(entries: Iterable[dict[str, Any]]) -> str | None:
    """The first user message, whitespace folded and cut to TITLE_CHARS; None if there is none.
    A message that only carries a sub-agent's notice is not one the user wrote."""
    for entry in entries:
        if entry.get("type") != "user_message" or "notice" in entry:
            continue
        text = entry.get("text")
        if isinstance(text, str) and text.strip():
            return preview(text, TITLE_CHARS)
    return None


def last_user_entry_id(log: SessionLog) -> str | None:
    """The id of the last message the user wrote on the current branch (a fork point)."""
    for entry in reversed(log.path()):
        if entry.get("type") == "user_message" and "notice" not in entry:
            entry_id = entry.get("id")
            return entry_id if isinstance(entry_id, str) else None
    return None


def _modified(file: Path) -> str:
    """The file's modification time, for a log without a readable time of its own."""
    try:
        stamp = file.stat().st_mtime
    except OSError:
        return ""
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="milliseconds")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def tree_costs(stored: Iterable[StoredSession]) -> dict[str, float | None]:
    """Each session's cost with every sub-agent below it; None when any of them is unknown.
    Parent links come from headers, which a hand-made file could make circular: a link back
    up the path is ignored, and the walk keeps no recursion (a chain may be long)."""
    own = {s.session_id: s.cost for s in stored}
    children: dict[str, list[str]] = {}
    for s in stored:
        parent = s.parent_session_id
        if parent is not None and parent in own and parent != s.session_id:
            children.setdefault(parent, []).append(s.session_id)
    totals: dict[str, float | None] = {}
    for start in own:
        if start in totals:
            continue
        path, on_path = [start], {start}
        pending = [iter(children.get(start, ()))]
        while path:
            child = next(pending[-1], None)
            if child is None:
                node = path.pop()
                on_path.discard(node)
                pending.pop()
                below = (totals[c] for c in children.get(node, ()) if c in totals)
                totals[node] = _add(own[node], below)
                continue
            if child in totals or child in on_path:
                continue
            path.append(child)
            on_path.add(child)
            pending.append(iter(children.get(child, ())))
    return totals


def _add(first: float | None, rest: Iterable[float | None]) -> float | None:
    total = first
    for value in rest:
        total = None if total is None or value is None else total + value
    return total


def session_list(
    stored: Iterable[StoredSession],
    notebook: str | None = None,
    live: Mapping[str, LiveSession] | None = None,
) -> list[SessionListItem]:
    """The list items of `stored` (those of `notebook` only, when given), newest first. `live`:
    the agents loaded now (their status; without it every session is `inactive` or `broken`)."""
    stored = list(stored)
    totals = tree_costs(stored)
    live = live or {}
    items: list[SessionListItem] = []
    for s in stored:
        loaded = live.get(s.session_id)
        path = loaded.notebook_path if loaded is not None else s.notebook_path
        if notebook is not None and path != notebook:
            continue
        item: SessionListItem = {
            "session_id": s.session_id,
            "notebook_path": path,
            "title": s.title,
            "created": s.created or None,
            "updated": s.updated or None,
            "provider": (loaded.provider if loaded else s.provider) or None,
            "model": (loaded.model if loaded else s.model) or None,
            "status": loaded.status if loaded else ("inactive" if s.broken is None else "broken"),
            "turns": s.turns,
            "cost": s.cost,
            "cost_total": totals.get(s.session_id),
        }
        if s.parent_session_id is not None:
            item["parent_session_id"] = s.parent_session_id
            if s.name:
                item["name"] = s.name
        if s.broken is not None:
            item["reason"] = s.broken
        if s.last_user_entry_id is not None:
            item["last_user_entry_id"] = s.last_user_entry_id
        items.append(item)
    items.sort(key=lambda i: i["updated"] or "", reverse=True)
    return items
