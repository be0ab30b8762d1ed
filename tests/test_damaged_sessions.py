"""One damaged session log never breaks the server: it is listed as `broken` with the reason,
every readable session still works, and nothing is rewritten on disk."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.sessions import (
    SESSION_FILE,
    SessionError,
    SessionLog,
    SessionRepository,
)

NOTEBOOK = "damaged.ipynb"
TORN_NOTEBOOK = "torn.ipynb"
ROOT_IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def header(session_id: Any, notebook: str = NOTEBOOK, **fields: Any) -> dict[str, Any]:
    return {
        "type": "session",
        "version": 1,
        "session_id": session_id,
        "created": "2026-01-01T00:00:00.000+00:00",
        "notebook_path": notebook,
        "provider": "scripted",
        "model": "demo",
        **fields,
    }


def entry(entry_id: str | None, parent: str | None, kind: str, **fields: Any) -> dict[str, Any]:
    record = {"parent_id": parent, "ts": "2026-01-01T00:00:01.000+00:00", "type": kind, **fields}
    if entry_id is not None:
        record["id"] = entry_id
    return record


def jsonl(*records: Any) -> bytes:
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)


HELLO = entry("e1", None, "user_message", text="hello", turn=1)

# name -> (what to write as the log, a phrase the reason must contain). The directory is the name.
DAMAGED_LOGS: dict[str, tuple[Any, str]] = {
    "header-not-utf8": (b'{"type": "session", "session_id": "\xff\xfe"}\n', "not valid UTF-8"),
    "header-is-an-array": (b"[1, 2]\n", "not a JSON object"),
    "header-is-a-string": (b'"session"\n', "not a JSON object"),
    "header-not-json": (b"this is not json\n", "header line is not JSON"),
    "header-without-session-id": (
        jsonl({k: v for k, v in header("x").items() if k != "session_id"}),
        "no session_id",
    ),
    "first-line-is-an-entry": (jsonl(HELLO), "not a session header"),
    "header-id-traversal": (jsonl(header("../../etc")), "'../../etc', not its directory"),
    "empty-file": (b"", "empty"),
    "no-log": (None, "missing"),
    "log-is-a-directory": ("directory", "not a regular file"),
    "log-is-a-pipe": ("fifo", "not a regular file"),
    "log-is-a-symlink-loop": ("loop", "cannot be read"),
    "log-is-too-large": ("gigabyte", "more than the 256 MiB read"),
    "header-nested-too-deeply": (b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested deeper"),
    "deeply-nested-line": (
        jsonl(header("deeply-nested-line"), HELLO) + b"[" * 100_000 + b"]" * 100_000 + b"\n",
        "session.jsonl: line 3 is nested deeper than 100 levels",
    ),
    "number-out-of-range": (
        jsonl(header("number-out-of-range"), HELLO) + b'{"id": "e2", "n": 1e999999}\n',
        "session.jsonl: line 3 holds a number out of range (1e999999)",
    ),
    "parent-id-not-a-string": (
        jsonl(header("parent-id-not-a-string"), HELLO, entry("e2", ["e1"], "turn_end", turn=1)),
        "line 3: entry 'e2' has an array as its parent_id",
    ),
    "turn-not-a-number": (
        jsonl(header("turn-not-a-number"), entry("e1", None, "user_message", text="x", turn="1")),
        "line 2: entry 'e1' (user_message) has a string as 'turn', not a number",
    ),
    "non-object-line": (
        jsonl(header("non-object-line"), [1, 2]),
        "line 2: an array where a record",
    ),
    "entry-without-id": (
        jsonl(header("entry-without-id"), entry(None, None, "user_message", text="x", turn=1)),
        "line 2: an entry without an id",
    ),
    "dangling-parent": (
        jsonl(header("dangling-parent"), HELLO, entry("e2", "gone", "turn_end", turn=1)),
        "line 3: entry 'e2' hangs off an unknown entry 'gone'",
    ),
    "dangling-leaf": (
        jsonl(header("dangling-leaf"), HELLO, {"type": "leaf", "leaf_id": "gone"}),
        "line 3: the position moves to an unknown entry 'gone'",
    ),
    "duplicate-id": (jsonl(header("duplicate-id"), HELLO, HELLO), "line 3: a second entry"),
    "user-message-without-text": (
        jsonl(header("user-message-without-text"), entry("e1", None, "user_message", turn=1)),
        "line 2: entry 'e1' (user_message) has no text field 'text'",
    ),
    "malformed-tool-calls": (
        jsonl(
            header("malformed-tool-calls"),
            HELLO,
            entry("e2", "e1", "assistant_message", text="", tool_calls=["x"], turn=1),
        ),
        "line 3: entry 'e2' has malformed tool_calls",
    ),
    "compaction-without-a-text-summary": (
        jsonl(
            header("compaction-without-a-text-summary"),
            HELLO,
            entry("c1", "e1", "compaction", summary=42, first_kept_entry_id="e1", turn=1),
        ),
        "line 3: entry 'c1' (compaction) has no text field 'summary'",
    ),
    "compaction-keeping-an-unknown-entry": (
        jsonl(
            header("compaction-keeping-an-unknown-entry"),
            HELLO,
            entry("c1", "e1", "compaction", summary="s", first_kept_entry_id="gone", turn=1),
        ),
        "line 3: compaction 'c1' keeps from 'gone', which is not an earlier entry of its branch",
    ),
    "compaction-keeping-another-branch": (
        jsonl(
            header("compaction-keeping-another-branch"),
            HELLO,
            entry("e2", None, "user_message", text="other root", turn=1),
            entry("c1", "e1", "compaction", summary="s", first_kept_entry_id="e2", turn=1),
        ),
        "line 4: compaction 'c1' keeps from 'e2', which is not an earlier entry of its branch",
    ),
}


def write_log(root: Path, name: str, content: Any) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    file = directory / SESSION_FILE
    if content == "directory":
        file.mkdir()
    elif content == "fifo":
        os.mkfifo(file)
    elif content == "loop":
        os.symlink(SESSION_FILE, file)
    elif content == "gigabyte":
        with open(file, "wb") as f:
            f.truncate(2**30)  # sparse: nothing on disk
    elif content is not None:
        file.write_bytes(content)
    return directory


def write_damaged_logs(root: Path, real_session_id: str) -> dict[str, str]:
    """Every kind of damage, plus a copy of a real session's directory; name -> reason."""
    reasons = {}
    for name, (content, reason) in DAMAGED_LOGS.items():
        write_log(root, name, content)
        reasons[name] = reason
    copied = (root / real_session_id / SESSION_FILE).read_bytes()
    write_log(root, "copied-directory", copied)
    reasons["copied-directory"] = "a copied directory"
    if not ROOT_IS_ROOT:  # root reads a chmod 000 file anyway (CI runs as root)
        unreadable = write_log(root, "unreadable", copied)
        (unreadable / SESSION_FILE).chmod(0)
        reasons["unreadable"] = "cannot be read"
    return reasons


def torn_tail_log(root: Path) -> Path:
    """What a crash mid-write leaves: the last line cut inside a multi-byte character."""
    whole = jsonl(header("torn-tail", TORN_NOTEBOOK), HELLO)
    cut = json.dumps(entry("e2", "e1", "assistant_message", text="café ☕", turn=1)).encode()
    cut = json.dumps(json.loads(cut), ensure_ascii=False).encode()
    return write_log(root, "torn-tail", whole + cut[: cut.index("☕".encode()) + 1])


def snapshot(root: Path) -> dict[str, Any]:
    """Each readable log's bytes (a large one's size and mtime: it is never read whole)."""
    return {str(p.relative_to(root)): _content(p) for p in root.rglob(SESSION_FILE) if _readable(p)}


def _readable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.R_OK)


def _content(path: Path) -> Any:
    info = path.stat()
    return path.read_bytes() if info.st_size <= 2**20 else (info.st_size, info.st_mtime_ns)


# ------------------------------------------------------------------ the log, without a server


@pytest.mark.parametrize("name", sorted(DAMAGED_LOGS))
def test_a_damaged_log_is_summarized_as_broken_with_its_reason(tmp_path: Path, name: str) -> None:
    content, reason = DAMAGED_LOGS[name]
    repo = SessionRepository(tmp_path)
    good = repo.create(notebook_path=NOTEBOOK, provider="scripted", model="demo")
    write_log(tmp_path, name, content)

    summaries = {s.session_id: s for s in repo.summaries()}

    assert summaries[good.session_id].broken is None
    assert reason in (summaries[name].broken or "")
    assert repo.latest_for_notebook(NOTEBOOK) == good.session_id
    with pytest.raises(SessionError, match="cannot be continued"):
        repo.load(name)


def test_entries_before_the_damage_are_kept_and_the_file_is_not_touched(tmp_path: Path) -> None:
    content, _ = DAMAGED_LOGS["dangling-parent"]
    directory = write_log(tmp_path, "dangling-parent", content)

    log = SessionLog.read(directory)

    assert [e["id"] for e in log.entries] == ["e1"]
    assert log.turns() == 1 and log.path() == [HELLO]
    assert (directory / SESSION_FILE).read_bytes() == content


def test_a_torn_tail_that_cuts_a_multibyte_character_is_skipped_not_fatal(tmp_path: Path) -> None:
    directory = torn_tail_log(tmp_path)

    log = SessionLog.load(directory)

    assert log.damage is None and log.skipped_lines == [3]
    assert [e["id"] for e in log.entries] == ["e1"]
    log.close_interrupted_turn()  # the next append starts on a line of its own
    assert [e["type"] for e in SessionLog.load(directory).entries] == ["user_message", "turn_end"]


def test_a_line_that_is_not_utf8_is_skipped_like_any_torn_line(tmp_path: Path) -> None:
    raw = jsonl(header("bad-bytes")) + b'{"id": "x\xff\xfe", "type": "user_message"}\n'
    directory = write_log(tmp_path, "bad-bytes", raw + jsonl(HELLO))

    log = SessionLog.load(directory)

    assert log.skipped_lines == [2] and [e["id"] for e in log.entries] == ["e1"]


def test_a_header_id_is_never_used_as_a_path(tmp_path: Path) -> None:
    repo = SessionRepository(tmp_path / "sessions")
    write_log(repo.root, "header-id-traversal", jsonl(header("../../etc")))

    (summary,) = repo.summaries()

    assert summary.session_id == "header-id-traversal"
    assert not (tmp_path / "etc").exists()


# ------------------------------------------------------------------ through the real server


async def list_sessions(jp_fetch: Any) -> dict[str, dict[str, Any]]:
    response = await jp_fetch("prime-agent", "api", "sessions")
    return {s["session_id"]: s for s in json.loads(response.body)["sessions"]}


async def attach(jp_fetch: Any, **body: Any) -> Any:
    return await jp_fetch(
        "prime-agent", "api", "sessions", method="POST", body=json.dumps(body), raise_error=False
    )


async def test_damaged_logs_are_listed_broken_and_every_readable_session_still_attaches(
    jp_fetch: Any, host: Any, make_notebook: Any
) -> None:
    path, torn_path = make_notebook(NOTEBOOK), make_notebook(TORN_NOTEBOOK)
    root = host.repository.root
    real = host.repository.create(notebook_path=path, provider="scripted", model="demo")
    real.append("user_message", text="hello", turn=1)
    real.append("turn_end", turn=1, stop_reason="end_turn", final_text="hi")
    reasons = write_damaged_logs(root, real.session_id)  # all newer than the real session
    torn_tail_log(root)
    on_disk = snapshot(root)

    listed = await list_sessions(jp_fetch)

    for name, reason in reasons.items():
        assert listed[name]["status"] == "broken", name
        assert reason in listed[name]["reason"], name
    assert listed[real.session_id]["status"] == "inactive"
    assert "reason" not in listed[real.session_id]
    assert listed["torn-tail"]["status"] == "inactive" and listed["torn-tail"]["turns"] == 1
    assert listed["dangling-parent"]["turns"] == 1  # what was read before the damage counts
    assert "../../etc" not in listed

    resumed = await attach(jp_fetch, notebook_path=path)
    assert resumed.code == 200, resumed.body
    assert json.loads(resumed.body)["session_id"] == real.session_id  # the copy never shadows it
    # ... and the skip is never silent: each newer damaged session of the notebook is named
    told = [
        e["text"]
        for e in host.agent(real.session_id).session.entries
        if e["type"] == "notice" and e.get("kind") == "session_unreadable"
    ]
    named = {name for name in reasons if any(f"session {name} " in t for t in told)}
    damaged_here = {
        name for name, s in listed.items() if s["status"] == "broken" and s["notebook_path"] == path
    }
    assert damaged_here and named == damaged_here
    for name, reason in reasons.items():
        refused = await attach(jp_fetch, notebook_path=path, session_id=name)
        assert refused.code == 409, (name, refused.body)
        assert reason in json.loads(refused.body)["message"], name
    torn = await attach(jp_fetch, notebook_path=torn_path)
    assert torn.code == 200, torn.body
    assert json.loads(torn.body)["session_id"] == "torn-tail"

    listed = await list_sessions(jp_fetch)
    assert listed[real.session_id]["status"] == "idle"
    assert {name for name, s in listed.items() if s["status"] == "broken"} == set(reasons)
    after = snapshot(root)
    assert {k: after[k] for k in on_disk if not k.startswith(("torn-tail", real.session_id))} == {
        k: v for k, v in on_disk.items() if not k.startswith(("torn-tail", real.session_id))
    }  # damaged logs are never rewritten


async def test_listing_and_loading_read_logs_off_the_event_loop(
    host: Any, make_notebook: Any
) -> None:
    path = make_notebook(NOTEBOOK)
    host.repository.create(notebook_path=path, provider="scripted", model="demo")
    loop_thread = threading.current_thread()
    readers: list[tuple[str, bool]] = []
    repo = host.repository
    for name in ("summaries", "latest_for_notebook", "load"):
        method = getattr(repo, name)

        def spy(*args: Any, _method: Any = method, _name: str = name) -> Any:
            readers.append((_name, threading.current_thread() is loop_thread))
            return _method(*args)

        setattr(repo, name, spy)

    await host.list_sessions()
    await host.attach(path)

    assert {name for name, _ in readers} >= {"summaries", "latest_for_notebook", "load"}
    assert not [name for name, on_loop in readers if on_loop]


def test_a_log_line_without_a_time_is_passed_over_for_when_the_session_changed(
    tmp_path: Path,
) -> None:
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    first = log.append("user_message", text="hi", turn=1)
    line = {"id": "x1", "parent_id": first["id"], "type": "notice", "kind": "forked", "text": "t"}
    with log.file.open("a", encoding="utf-8") as f:  # as a log written elsewhere may hold
        f.write(json.dumps(line) + "\n")

    loaded = SessionLog.read(log.directory)

    assert loaded.entries[-1]["id"] == "x1" and "ts" not in loaded.entries[-1]
    assert loaded.updated() == first["ts"]
