"""The tree of agents, read from the session headers on disk.

A sub-agent's session header names its parent (`parent_session_id`), its `name`, its `depth` and
its `task`; a root's header has none of these. Headers are written once and never change, so the
tree is an index over them: it survives compaction, kernel restarts and server restarts with
nothing to keep in step. A deleted sub-agent keeps its session and notebook; a `deleted` marker
file in its session directory takes it out of the tree and frees its name.

A header is a claim: one that breaks the tree's rules (core/member_rules.py) makes a refused
member, listed with its `problem` and never loaded, and left out of every agent's family. A
session folder removed from disk leaves the index at the next look, unless its agent is in memory
(then it stays, with that said as its problem, until it leaves memory).
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from .jsonfile import MAX_SESSION_HEADER_BYTES, BadJson, UnreadableFile, parse_json, read_prefix
from .member_rules import child_header_problem, tree_problems
from .sessions import SESSION_FILE, SessionRepository, now_iso
from .text import shorten
from .whole_writes import replace_whole

Relationship = Literal["parent", "child", "sibling"]

DELETED_MARKER = "deleted.json"
RESERVED_NAMES = frozenset({"all", "parent", "child", "children", "sibling", "siblings", "self"})
MAX_NAME = 64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


SESSION_UNREADABLE = 410  # FamilyError status: the agent's session file cannot be read
REFUSED = 409  # FamilyError status: the member's header breaks the tree's rules
VANISHED = "its session folder was removed from disk; it is listed while it stays in memory"


class FamilyError(Exception):
    """A request the family rules refuse; `status` is the HTTP-like code for the bridge."""

    def __init__(self, status: int, message: str, *, lasting: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.lasting = lasting  # the same request fails until the server's setup changes


def check_name(name: object) -> str:
    """A sub-agent name: a readable file name of its own, never a path or a reserved word."""
    if not isinstance(name, str) or not name:
        raise FamilyError(400, "a sub-agent name must be a non-empty string")
    if "/" in name or "\\" in name or ".." in name or "\x00" in name:
        raise FamilyError(400, f"a sub-agent name may not hold a path: {shorten(name, 80)}")
    if name.lower() in RESERVED_NAMES:
        raise FamilyError(400, f"{name!r} is reserved (it names a group of agents); pick another")
    if len(name) > MAX_NAME or not _NAME.fullmatch(name) or name.endswith("."):
        raise FamilyError(
            400,
            f"invalid sub-agent name {shorten(name, 80)}: use up to {MAX_NAME} letters, digits, "
            "'-', '_' or '.', starting with a letter or digit",
        )
    return name


def default_name(task: str) -> str:
    """A slug of the task's first words plus a short id: `summarise-part-a-3f9c`."""
    words = re.findall(r"[A-Za-z0-9]+", task.lower())
    slug = "-".join(words)[:40].strip("-") or "task"
    return f"{slug}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class Member:
    """One agent as the tree knows it (from its session header)."""

    session_id: str
    notebook_path: str
    parent_session_id: str | None = None
    name: str = ""
    depth: int = 0
    task: str = ""
    model: str = ""
    created: str = ""
    problem: str = ""
    """Why the tree refuses it (core/member_rules.py), or why its folder is gone; "" when sound."""

    @property
    def display_name(self) -> str:
        """A child's name; a root is known by its notebook."""
        return self.name or self.notebook_path

    @property
    def session_dir(self) -> str:
        return self.session_id

    @property
    def refused(self) -> bool:
        """Its header breaks the tree's rules: listed, never loaded, in no agent's family."""
        return bool(self.problem) and self.problem != VANISHED

    @property
    def why_refused(self) -> str:
        """Why a message for it can never be delivered."""
        return f"the agent tree refuses it ({self.problem})"

    @property
    def vanished(self) -> bool:
        """Its session folder was removed from disk while its agent is in memory."""
        return self.problem == VANISHED

    def refusal(self) -> FamilyError:
        """The error an action on a refused member (or one whose folder is gone) answers with."""
        if self.vanished:
            return FamilyError(
                REFUSED,
                f"session {self.session_id}: {VANISHED}; it can no longer be messaged or "
                "deleted (restore the folder, or let it leave memory)",
            )
        return FamilyError(
            REFUSED,
            f"session {self.session_id} is refused: {self.problem}. Nothing loads it; remove "
            f"its folder .prime-agent/sessions/{self.session_id} if it is not yours",
            lasting=True,
        )


def member_from_header(header: dict[str, Any]) -> Member | None:
    session_id = header.get("session_id")
    if not isinstance(session_id, str):
        return None
    parent = header.get("parent_session_id")
    depth = header.get("depth", 0)
    is_child = parent is not None and parent != ""
    problem = ""
    if is_child and not isinstance(parent, str):
        problem = "its header's parent_session_id is not a session id"
    elif is_child:
        problem = child_header_problem(header)
    return Member(
        session_id=session_id,
        notebook_path=str(header.get("notebook_path", "")),
        parent_session_id=parent if isinstance(parent, str) and parent else None,
        name=str(header.get("name", "") or ""),
        depth=depth if isinstance(depth, int) and depth >= 0 else 0,
        task=str(header.get("task", "") or ""),
        model=_model_name(header),
        created=str(header.get("created", "") or ""),
        problem=problem,
    )


def _model_name(header: dict[str, Any]) -> str:
    """`provider/model`, as a live handle names it (a header keeps the two apart)."""
    provider, model = header.get("provider"), header.get("model")
    if not isinstance(model, str) or not model:
        return ""
    return f"{provider}/{model}" if isinstance(provider, str) and provider else model


class Family:
    """An index of the session headers under one repository, read lazily and kept current."""

    def __init__(
        self, repository: SessionRepository, resident: Callable[[str], bool] = lambda _: False
    ) -> None:
        self._repository = repository
        self._resident = resident  # an agent in memory keeps its member when its folder goes
        self._members: dict[str, Member] = {}  # as their headers say
        self._judged: dict[str, Member] = {}  # the same, with each refused one's problem
        self._deleted: set[str] = set()
        self._seen_dirs: set[str] = set()
        self._vanished: set[str] = set()  # resident, folder gone
        self._lock = threading.Lock()

    # ------------------------------------------------------------ reading

    def refresh(self) -> None:
        """Index sessions created since the last look (by this process or another) and drop
        those whose folder is gone (kept, marked, while their agent is in memory)."""
        root = self._repository.root
        with self._lock:
            try:
                present = {d.name: d for d in root.iterdir()}
            except FileNotFoundError:  # the sessions folder itself is gone (or not made yet)
                present = {}
            except OSError:  # cannot look now (too many open files...): keep what is known
                return
            changed = self._drop_vanished(present)
            for name, directory in present.items():
                if name in self._seen_dirs or not directory.is_dir():
                    continue
                if directory.is_symlink():  # never followed (docs/trust.md)
                    continue
                header = _read_header(directory)
                if header is None:
                    continue  # not a session (yet): looked at again next time
                self._seen_dirs.add(name)
                member = member_from_header(header)
                if member is None or member.session_id != name:
                    continue
                self._members[member.session_id] = member
                changed = True
                if (directory / DELETED_MARKER).exists():
                    self._deleted.add(member.session_id)
            if changed:
                self._judge()

    def _drop_vanished(self, present: dict[str, Path]) -> bool:
        """Forget the members whose folder is gone, unless in memory; whether any changed."""
        changed = False
        for session_id in [s for s in self._members if s not in present]:
            if self._resident(session_id):
                changed |= session_id not in self._vanished
                self._vanished.add(session_id)
                continue
            self._members.pop(session_id, None)
            self._deleted.discard(session_id)
            self._seen_dirs.discard(session_id)
            self._vanished.discard(session_id)
            changed = True
        for session_id in [s for s in self._vanished if s in present]:  # back (restored)
            self._vanished.discard(session_id)
            changed = True
        self._seen_dirs &= present.keys()
        return changed

    def _judge(self) -> None:
        """Apply the tree's rules to every member (under the lock)."""
        problems = tree_problems(self._members, self._deleted, self._resident)
        for session_id in self._vanished:
            problems.setdefault(session_id, VANISHED)
        self._judged = {
            sid: replace(m, problem=problems[sid]) if sid in problems else m
            for sid, m in self._members.items()
        }

    def add(self, member: Member) -> None:
        """A session this process just created."""
        with self._lock:
            self._members[member.session_id] = member
            self._seen_dirs.add(member.session_id)
            self._judge()

    def member(self, session_id: str) -> Member | None:
        """The member (a refused one too, with its `problem`), None when unknown or deleted."""
        found = self._judged.get(session_id)
        if found is None:
            self.refresh()
            found = self._judged.get(session_id)
        return found if found is not None and session_id not in self._deleted else None

    def children(self, session_id: str, deleted: bool = False) -> list[Member]:
        """The direct children of `session_id`, oldest first; with `deleted`, those taken out
        of the tree too (what they spent still counts)."""
        self.refresh()
        return sorted(
            (
                m
                for m in self._judged.values()
                if m.parent_session_id == session_id
                and not m.refused
                and (deleted or m.session_id not in self._deleted)
            ),
            key=lambda m: (m.created, m.session_id),  # one order, also within a millisecond
        )

    def members(self, deleted: bool = False) -> list[Member]:
        """Every member indexed so far (call `refresh` first), refused ones included (their
        `problem` says why), oldest first; with `deleted`, those taken out of the tree too (the
        Agents View walks the tree from this once)."""
        with self._lock:
            found = [
                m for m in self._judged.values() if deleted or m.session_id not in self._deleted
            ]
        return sorted(found, key=lambda m: m.created)

    def siblings(self, session_id: str, roots: set[str] | None = None) -> list[Member]:
        """Members with the same parent. Roots are siblings of each other; `roots` narrows
        them to the ones that matter (the loaded ones), as old root sessions pile up on disk."""
        me = self.member(session_id)
        if me is None or me.refused:
            return []
        if me.parent_session_id is not None:
            return [m for m in self.children(me.parent_session_id) if m.session_id != session_id]
        return [
            m
            for m in self._judged.values()
            if m.parent_session_id is None
            and not m.refused
            and m.session_id != session_id
            and m.session_id not in self._deleted
            and (roots is None or m.session_id in roots)
        ]

    def relationship(self, sender: str, receiver: str) -> Relationship | None:
        """How `receiver` relates to `sender` (from the sender's side); None: outside the
        nuclear family (parent, siblings, direct children), or the same agent."""
        a, b = self.member(sender), self.member(receiver)
        if a is None or b is None or a.session_id == b.session_id or a.refused or b.refused:
            return None
        if a.parent_session_id == b.session_id:
            return "parent"
        if b.parent_session_id == a.session_id:
            return "child"
        if a.parent_session_id == b.parent_session_id:  # same parent, or both roots
            return "sibling"
        return None

    # ------------------------------------------------------------ deleting

    def mark_deleted(self, session_id: str, directory: Path) -> None:
        """Take a sub-agent out of the tree; its session and notebook stay on disk."""
        marker = directory / DELETED_MARKER
        # Whole or absent: the marker's presence is what a restart reads (a full disk fails it).
        replace_whole(marker, (json.dumps({"deleted": now_iso()}) + "\n").encode())
        with self._lock:
            self._deleted.add(session_id)

    def forget(self, session_id: str) -> None:
        """A session whose directory was removed (`DELETE .../sessions/<id>`)."""
        with self._lock:
            self._members.pop(session_id, None)
            self._deleted.discard(session_id)
            self._seen_dirs.discard(session_id)
            self._vanished.discard(session_id)
            self._judge()

    def is_deleted(self, session_id: str) -> bool:
        return session_id in self._deleted


def _read_header(directory: Path) -> dict[str, Any] | None:
    """The log's header, or None when it cannot be read (the session list says why)."""
    try:
        head = read_prefix(directory / SESSION_FILE, MAX_SESSION_HEADER_BYTES)
        header = parse_json(head.split(b"\n", 1)[0])
    except (UnreadableFile, BadJson):
        return None
    return header if isinstance(header, dict) and header.get("type") == "session" else None
