"""Branching a session: move its leaf, fork it from a user message, clone its current branch.

The rules (branch points, what a fork copies, how cells of other branches are marked) are in
docs/branching.md. This module is pure domain: the host supplies the notebook I/O.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .blank_cell import with_blank_cell
from .harness.keeper import LOCAL_DIR
from .jsonfile import (
    MAX_BLOB_BYTES,
    MAX_COPIED_FILE_BYTES,
    UnreadableFile,
    copy_file,
    parse_json,
)
from .sessions import BLOBS, SessionLog, SessionRepository, new_session_id
from .text import json_type, shorten

log = logging.getLogger(__name__)

BRANCH_POINTS = ("user_message", "turn_end")
"""Entry types the leaf may move to (see docs/branching.md)."""
OTHER_BRANCH = "other"
"""`metadata.prime_agent.branch` of an agent cell written by entries off the current path."""
KERNEL_STATE_DIR = "kernel-state"
HARNESS_DIR = LOCAL_DIR
PREVIEW_CHARS = 120
FORK_NOTICE_KIND = "forked"


class BranchError(Exception):
    """A branch, fork or clone that cannot be done; `status` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class BranchMove:
    leaf_id: str | None  # where the leaf moved (None: before the first entry)
    text: str | None  # a user message branched away from: its text, to edit and resend


# ---------------------------------------------------------------- the tree


def tree(session: SessionLog) -> dict[str, Any]:
    """Every entry as a node (id, parent, type, turn, one-line preview), the leaf and which
    entries are on the current branch. Flat, parents by id: a long session stays shallow JSON."""
    on_branch = {entry["id"] for entry in session.path()}
    nodes = [
        {
            "id": entry["id"],
            "parent_id": entry.get("parent_id"),
            "type": entry["type"],
            "turn": entry.get("turn") if isinstance(entry.get("turn"), int) else None,
            "ts": str(entry.get("ts", "")),
            "preview": preview(entry),
            "on_branch": entry["id"] in on_branch,
            "branch_point": entry["type"] in BRANCH_POINTS,
        }
        for entry in session.entries
    ]
    out: dict[str, Any] = {
        "session_id": session.session_id,
        "leaf_id": session.leaf_id,
        "entries": nodes,
    }
    for key in ("forked_from", "cloned_from"):
        if isinstance(session.header.get(key), dict):
            out[key] = session.header[key]
    if session.damage is not None:
        out["broken"] = session.damage
    return out


def preview(entry: dict[str, Any]) -> str:
    """One line that says what the entry is."""
    kind = entry["type"]
    if kind in ("user_message", "agent_message", "notice"):
        text = entry.get("text")
    elif kind == "assistant_message":
        text = entry.get("text") or _first_code(entry.get("tool_calls"))
    elif kind == "tool_result":
        text = entry.get("preview") or entry.get("observation")
    elif kind == "turn_end":
        text = entry.get("final_text") or f"(turn ended: {entry.get('stop_reason', '')})"
    elif kind == "error":
        text = entry.get("message")
    else:
        text = ""
    return _one_line(text if isinstance(text, str) else "")


def _first_code(calls: Any) -> str:
    if not isinstance(calls, list) or not calls or not isinstance(calls[0], dict):
        return ""
    try:
        code = parse_json(calls[0].get("arguments", "")).get("code", "")
    except (ValueError, TypeError, AttributeError):
        return ""
    return code if isinstance(code, str) else ""


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"


# ---------------------------------------------------------------- moving the leaf


def entry_of(session: SessionLog, entry_id: object) -> dict[str, Any]:
    """The entry `entry_id` names; 400 for what is not an id, 404 for an id not in this log."""
    if not isinstance(entry_id, str) or not entry_id:
        shown = json_type(entry_id)
        raise BranchError(400, f"entry_id must be an entry id (a string), not {shown}")
    entry = session.by_id.get(entry_id)
    if entry is None:
        raise BranchError(404, f"no entry {shorten(entry_id)} in session {session.session_id}")
    return entry


def branch_target(session: SessionLog, entry_id: object) -> BranchMove:
    """Where the leaf goes for a branch to `entry_id` (docs/branching.md: branch points)."""
    entry = entry_of(session, entry_id)
    if entry["type"] == "user_message":
        return BranchMove(entry.get("parent_id"), entry["text"])
    if entry["type"] == "turn_end":
        return BranchMove(entry["id"], None)
    raise BranchError(
        400,
        f"entry {shorten(entry['id'])} is a {entry['type']}: a branch goes to a user message "
        "(to resend it differently) or to the end of a turn",
    )


def move_leaf(session: SessionLog, entry_id: object, *, running: bool) -> BranchMove:
    """Branch: the next message continues from the target. Refused while a turn runs."""
    refuse_broken(session)
    if running:
        raise BranchError(409, "the agent is working on a turn; stop it or wait before branching")
    move = branch_target(session, entry_id)
    if move.leaf_id != session.leaf_id:
        session.move_leaf(move.leaf_id)
    return move


def refuse_broken(session: SessionLog) -> None:
    if session.damage is not None:
        raise BranchError(409, f"session {session.session_id} is damaged: {session.damage}")


def cells_by_branch(session: SessionLog) -> tuple[set[str], set[str]]:
    """Agent cell ids written by entries on the current path, and by entries off it."""
    on_path = {entry["id"] for entry in session.path()}
    on: set[str] = set()
    off: set[str] = set()
    for entry in session.entries:
        cell_id = entry.get("cell_id")
        if isinstance(cell_id, str) and entry["type"] in ("cell_started", "tool_result"):
            (on if entry["id"] in on_path else off).add(cell_id)
    return on, off - on


def mark_cell(metadata: dict[str, Any], on_branch: bool) -> bool:
    """Set or clear the `branch` mark in a cell's `prime_agent` metadata; True if it changed."""
    agent = metadata.get("prime_agent")
    if not isinstance(agent, dict):
        return False
    marked = agent.get("branch") == OTHER_BRANCH
    if on_branch == (not marked):
        return False
    if on_branch:
        agent.pop("branch", None)
    else:
        agent["branch"] = OTHER_BRANCH
    return True


# ---------------------------------------------------------------- fork and clone


@dataclass(frozen=True)
class CopyPlan:
    """What a fork or clone copies: the entries, where it came from, the notebook's kind."""

    source: SessionLog
    entries: list[dict[str, Any]]
    origin_key: str  # header field: "forked_from" | "cloned_from"
    origin_entry: str | None
    kind: str  # "fork" | "clone"
    text: str | None  # fork: the message forked from


def plan_fork(session: SessionLog, entry_id: object) -> CopyPlan:
    refuse_broken(session)
    entry = entry_of(session, entry_id)
    if entry["type"] != "user_message":
        raise BranchError(
            400,
            f"entry {shorten(entry['id'])} is a {entry['type']}: a fork starts from a user message",
        )
    entries = _path_to(session, entry.get("parent_id"))
    return CopyPlan(session, entries, "forked_from", entry["id"], "fork", entry["text"])


def plan_clone(session: SessionLog) -> CopyPlan:
    refuse_broken(session)
    return CopyPlan(session, session.path(), "cloned_from", session.leaf_id, "clone", None)


def _path_to(session: SessionLog, entry_id: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = entry_id
    while cursor is not None:
        entry = session.by_id[cursor]
        out.append(entry)
        cursor = entry.get("parent_id")
    out.reverse()
    return out


def copy_notebook_path(original: str, kind: str, n: int) -> str:
    """`<stem>-<kind>-<n>.ipynb` beside the original."""
    folder, name = posixpath.split(original)
    stem = name[: -len(".ipynb")] if name.endswith(".ipynb") else name
    return posixpath.join(folder, f"{stem}-{kind}-{n}.ipynb")


def notebook_cells(
    plan: CopyPlan, source_cells: Iterable[dict[str, Any]], session_id: str
) -> tuple[list[dict[str, Any]], int]:
    """The copy's cells: a link back to the original, then the agent cells of the copied path
    in path order, tagged with the new session, then an empty cell for the user. Also how many of
    them the notebook no longer had."""
    by_id = {c.get("id"): c for c in source_cells if isinstance(c, dict)}
    wanted: list[str] = []
    for entry in plan.entries:
        cell_id = entry.get("cell_id")
        if entry["type"] == "tool_result" and isinstance(cell_id, str) and cell_id not in wanted:
            wanted.append(cell_id)
    cells = [_header_cell(plan)]
    missing = 0
    for cell_id in wanted:
        cell = by_id.get(cell_id)
        if cell is None:
            missing += 1
            continue
        cells.append(_clean_code_cell(cell, session_id))
    return with_blank_cell(cells), missing


def _header_cell(plan: CopyPlan) -> dict[str, Any]:
    original = plan.source.notebook_path
    link = posixpath.basename(original)
    what = "Forked" if plan.kind == "fork" else "Cloned"
    text = f"{what} from [{link}]({link}) (session `{plan.source.session_id}`)"
    if plan.text is not None:
        text += f" before the message:\n\n> {_one_line(plan.text)}"
    return {
        "id": f"{plan.kind}-origin",
        "cell_type": "markdown",
        "source": text,
        "metadata": {"prime_agent": {"role": f"{plan.kind}_origin"}},
    }


def _clean_code_cell(cell: dict[str, Any], session_id: str) -> dict[str, Any]:
    """A valid nbformat 4.5 code cell (the live document adds fields nbformat refuses)."""
    metadata = dict(cell.get("metadata") or {})
    agent = dict(metadata.get("prime_agent") or {})
    agent.pop("branch", None)
    metadata["prime_agent"] = {**agent, "session_id": session_id}
    count = cell.get("execution_count")
    return {
        "id": str(cell["id"]),
        "cell_type": "code",
        "source": _text(cell.get("source")),
        "metadata": metadata,
        "outputs": [_clean_output(o) for o in cell.get("outputs") or [] if isinstance(o, dict)],
        "execution_count": count if isinstance(count, int) else None,
    }


_OUTPUT_KEYS = {
    "stream": ("output_type", "name", "text"),
    "display_data": ("output_type", "data", "metadata"),
    "execute_result": ("output_type", "data", "metadata", "execution_count"),
    "error": ("output_type", "ename", "evalue", "traceback"),
}


def _clean_output(output: dict[str, Any]) -> dict[str, Any]:
    keys = _OUTPUT_KEYS.get(str(output.get("output_type")), tuple(output))
    clean = {k: output[k] for k in keys if k in output}
    if clean.get("output_type") == "stream":
        clean["text"] = _text(clean.get("text"))
    if clean.get("output_type") in ("display_data", "execute_result"):
        clean.setdefault("data", {})
        clean.setdefault("metadata", {})
    if clean.get("output_type") == "execute_result":
        clean.setdefault("execution_count", None)
    return clean


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else str(value or "")


def fresh_kernel_notice(plan: CopyPlan) -> str:
    what = "forked" if plan.kind == "fork" else "cloned"
    return (
        f"This session was {what} from session {plan.source.session_id}. It runs on a fresh "
        "kernel: variables, imports and files opened in the original were not carried over "
        "(re-run what you need). Sub-agents spawned before belong to the original session."
    )


CreateNotebook = Callable[[str, list[dict[str, Any]]], Awaitable[Any]]


async def write_copy(
    repository: SessionRepository,
    plan: CopyPlan,
    source_cells: Iterable[dict[str, Any]],
    create_notebook: CreateNotebook,
) -> dict[str, Any]:
    """Make the fork or clone: new session (header, copied entries, notice), new notebook.
    `create_notebook(path, cells)` raises FileExistsError for a taken path."""
    provider, model = plan.source.current_model()
    origin = {"session_id": plan.source.session_id, "entry_id": plan.origin_entry}
    source_path = plan.source.notebook_path
    session_id = _free_session_id(repository)
    n = 1
    while True:
        path = copy_notebook_path(source_path, plan.kind, n)
        cells, missing = notebook_cells(plan, source_cells, session_id)
        try:
            await create_notebook(path, cells)
            break
        except FileExistsError:
            n += 1
    header = {
        "session_id": session_id,
        "notebook_path": path,
        "provider": provider,
        "model": model,
        plan.origin_key: origin,
        "copied_entries": len(plan.entries),  # the first ones: the origin's, not its own
    }
    session = SessionLog.create(repository.directory(session_id), header)
    session.adopt(plan.entries)
    _copy_blobs(plan, session)
    _copy_harness(plan, session)
    restored = _copy_kernel_state(plan, session) if plan.kind == "clone" else False
    if not restored:
        session.append("notice", kind=FORK_NOTICE_KIND, text=fresh_kernel_notice(plan))
    out: dict[str, Any] = {
        "session_id": session.session_id,
        "notebook_path": path,
        plan.origin_key: origin,
        "kernel_state_copied": restored,
        "missing_cells": missing,
    }
    if plan.text is not None:
        out["text"] = plan.text
    return out


def _free_session_id(repository: SessionRepository) -> str:
    session_id = new_session_id()
    while repository.directory(session_id).exists():
        session_id = new_session_id()
    return session_id


def _copy_blobs(plan: CopyPlan, session: SessionLog) -> None:
    """The image files the copied entries name (format 2 keeps images beside the log, so a
    copy without them would show the model "missing on disk"). One already gone stays gone."""
    names = {
        image["blob"]
        for entry in plan.entries
        for image in _as_list(entry.get("images"))
        if isinstance(image, dict) and isinstance(image.get("blob"), str)
    }
    source = plan.source.directory / BLOBS
    target = session.directory / BLOBS
    for name in sorted(names):
        if Path(name).name == name and name not in ("", ".", ".."):  # never a path
            target.mkdir(exist_ok=True)
            _copy_one(source / name, target / name, MAX_BLOB_BYTES)


def _copy_harness(plan: CopyPlan, session: SessionLog) -> None:
    """The local harness store goes with the copy (its entries, records and skill modules)."""
    source = plan.source.directory / HARNESS_DIR
    if source.is_dir():
        _copy_tree(source, session.directory / HARNESS_DIR, skip_hidden=True)


def _copy_kernel_state(plan: CopyPlan, session: SessionLog) -> bool:
    source = plan.source.directory / KERNEL_STATE_DIR
    if not source.is_dir():
        return False
    _copy_tree(source, session.directory / KERNEL_STATE_DIR, skip_hidden=False)
    return True


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _copy_tree(source: Path, target: Path, skip_hidden: bool) -> None:
    """Copy the regular files under `source`; a pipe, a symlink loop or an oversized file is
    left behind (logged), never read."""
    target.mkdir(parents=True, exist_ok=True)
    for child in sorted(source.iterdir()):
        if skip_hidden and child.name.startswith("."):
            continue
        if child.is_dir() and not child.is_symlink():
            _copy_tree(child, target / child.name, skip_hidden)
        else:
            _copy_one(child, target / child.name, MAX_COPIED_FILE_BYTES)


def _copy_one(source: Path, target: Path, max_bytes: int) -> None:
    try:
        copy_file(source, target, max_bytes)
    except UnreadableFile as exc:
        if not exc.missing:
            log.warning("not copied: %s", exc)
