"""Every file the product reads survives any content (issue 15, item 4).

Each file type (session log and header, mailbox, harness store local and global, refinement
records, snapshot manifests and variable files, image blobs, notebooks, request bodies) gets
every hostile content below (deep nesting, bad UTF-8, NUL bytes, numbers out of range, a FIFO,
a directory, a symlink loop, a 1 GiB file, random bytes from a seeded generator, truncated valid
files, valid JSON of the wrong shape) through its real entry point. What must hold: that file's
`broken` state (or its reader's equivalent) with the file named; nothing else affected (another
session, the extension's start, the other harness store, other routes); no 500, no read that
blocks, nothing read whole past its cap. docs/sessions.md, "Damaged files", has the rules.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prime_agent_kernel import files as kernel_files
from prime_agent_kernel import snapshot as kernel_snapshot

from prime_agent_lab.adapters.nbjson import read_notebook
from prime_agent_lab.core import branching
from prime_agent_lab.core.family import Family
from prime_agent_lab.core.harness.keeper import LOCAL_DIR
from prime_agent_lab.core.harness.store import (
    REFINEMENTS_FILE,
    STATE_FILE,
    Harness,
    HarnessError,
    HarnessStore,
)
from prime_agent_lab.core.harness.summary import harness_section
from prime_agent_lab.core.harness_ops import harness_state
from prime_agent_lab.core.jsonfile import UnreadableFile, read_json_object
from prime_agent_lab.core.mailbox import MAILBOX_FILE
from prime_agent_lab.core.sessions import (
    BLOBS,
    SESSION_FILE,
    BrokenSession,
    SessionLog,
    SessionRepository,
)
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.core.snapshots import (
    MANIFEST,
    NOT_RESTORED,
    RESTORE_REPORT,
    SnapshotFailed,
    commit_snapshot,
    describe_restore,
    read_manifest,
    restore_snapshot,
    state_directory,
)
from prime_agent_lab.core.transcript import chat_transcript, history_records
from prime_agent_lab.core.trust import Signer
from prime_agent_lab.headless import HeadlessRun

from .conftest import run_turn, use_script
from .test_cli import cli

Make = Callable[[Path], None]
GIB = 2**30
STARTED = time.monotonic()


# ---------------------------------------------------------------- hostile contents


def data(raw: bytes) -> Make:
    def make(path: Path) -> None:
        path.write_bytes(raw)

    return make


def fifo(path: Path) -> None:
    os.mkfifo(path)  # opened without O_NONBLOCK, a read waits for a writer for ever


def directory(path: Path) -> None:
    path.mkdir()


def symlink_loop(path: Path) -> None:
    os.symlink(path.name, path)


def gigabyte(path: Path) -> None:
    with open(path, "wb") as file:  # sparse: 1 GiB on paper, nothing on disk
        file.truncate(GIB)


def _random_contents(seed: int = 15) -> dict[str, Make]:
    """Random bytes, and random bytes from JSON's own alphabet (which reach the parser's
    deeper paths), from a seeded generator so a failure can be replayed."""
    rng = random.Random(seed)
    alphabet = b'[]{}",:0123456789.eE-+ \\u\n\x00\xfftruefalsenull'
    out: dict[str, Make] = {}
    for n in range(4):
        out[f"random-bytes-{n}"] = data(rng.randbytes(rng.randint(1, 4096)))
        size = rng.randint(1, 4096)
        out[f"random-json-alphabet-{n}"] = data(bytes(rng.choice(alphabet) for _ in range(size)))
    return out


HOSTILE: dict[str, Make] = {
    "deep-array": data(b"[" * 100_000 + b"]" * 100_000),
    "deep-object": data(b'{"a": ' * 50_000 + b"1" + b"}" * 50_000),
    "just-too-deep": data(b"[" * 101 + b"]" * 101),
    "invalid-utf8": data(b'{"type": "session", "text": "\xff\xfe\xfd"}'),
    "nul-bytes": data(b'{"type": "session"}\x00\x00\x00'),
    "huge-float": data(b'{"type": "session", "n": 1e999999}'),
    "huge-int": data(b'{"type": "session", "n": ' + b"7" * 100_000 + b"}"),
    "nan": data(b'{"type": "session", "n": NaN}'),
    "lone-surrogate": data(b'{"type": "session", "text": "\\ud800"}'),
    "utf8-bom": data(b'\xef\xbb\xbf{"type": "session"}'),
    "empty": data(b""),
    "an-array": data(b"[1, 2, 3]"),
    "a-string": data(b'"session"'),
    "null": data(b"null"),
    "fifo": fifo,
    "directory": directory,
    "symlink-loop": symlink_loop,
    "one-gibibyte": gigabyte,
    **_random_contents(),
}
SPECIAL_FILES = ("fifo", "directory", "symlink-loop", "one-gibibyte")
BYTE_CASES = {name: make for name, make in HOSTILE.items() if name not in SPECIAL_FILES}


def truncations(valid: bytes) -> dict[str, Make]:
    """A valid file cut by a crash: halfway, before its last byte, inside a multi-byte
    character."""
    valid = valid.rstrip(b"\n")
    cuts = {"truncated-half": valid[: len(valid) // 2], "truncated-last-byte": valid[:-1]}
    euro = valid.find("€".encode())
    if euro > 0:
        cuts["truncated-in-a-character"] = valid[: euro + 1]
    return {name: data(raw) for name, raw in cuts.items()}


def jsonl(*records: Any) -> bytes:
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)


# ---------------------------------------------------------------- valid files to start from


def header(session_id: str, notebook: str = "good.ipynb") -> dict[str, Any]:
    return {
        "type": "session",
        "version": 2,
        "session_id": session_id,
        "created": "2026-01-01T00:00:00.000+00:00",
        "notebook_path": notebook,
        "provider": "scripted",
        "model": "demo",
    }


def entry(entry_id: str, parent: str | None, entry_type: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": entry_id,
        "parent_id": parent,
        "ts": "2026-01-01T00:00:01.000+00:00",
        "type": entry_type,
        **fields,
    }


BLOB = "0" * 64 + ".png"
ENTRIES = [
    entry("e1", None, "user_message", text="price in € please", turn=1),
    entry(
        "e2",
        "e1",
        "assistant_message",
        text="",
        turn=1,
        tool_calls=[{"id": "c1", "name": "python", "arguments": json.dumps({"code": "1"})}],
    ),
    entry("e3", "e2", "cell_started", turn=1, tool_call_id="c1", cell_id="cell-1"),
    entry(
        "e4",
        "e3",
        "tool_result",
        turn=1,
        tool_call_id="c1",
        cell_id="cell-1",
        status="ok",
        execution_count=1,
        observation="1",
        preview="1",
        images=[{"media_type": "image/png", "blob": BLOB, "bytes": 3}],
    ),
    entry("e5", "e4", "notice", kind="kernel_died", text="the kernel died"),
    entry("e6", "e5", "turn_end", turn=1, stop_reason="end_turn", final_text="1 €"),
    entry(
        "e7",
        "e6",
        "compaction",
        summary="s",
        first_kept_entry_id="e6",
        tokens_before=10,
        tokens_after=2,
        dropped_entries=5,
        turn=2,
    ),
    entry("e8", "e7", "refinement", text="r", refinement={"id": "r1", "edits": []}),
    entry("e9", "e8", "notebook_moved", path="good.ipynb", old_path="old.ipynb"),
    entry("e10", "e9", "agent_message", text="m", turn=2, from_name="x"),
    entry("e11", "e10", "error", turn=2, message="boom", kind="internal"),
]


def valid_log(session_id: str, notebook: str = "good.ipynb") -> bytes:
    moved = [{**e, "path": notebook} if e["type"] == "notebook_moved" else e for e in ENTRIES]
    return jsonl(header(session_id, notebook), *moved)


WRONG_VALUES: list[Any] = [None, 1, 2.5, True, "text", [], {}, [1, "x"], {"a": [1]}, "../../x"]


def wrong_field_logs() -> Iterator[tuple[str, bytes]]:
    """Valid JSON of the wrong shape: every field of every entry and of the header, in turn,
    given a value of each other type."""
    n = 0
    for index, original in enumerate([header("x"), *ENTRIES]):
        for key in original:
            for value in WRONG_VALUES:
                if value == original[key] or key in ("type",):
                    continue
                n += 1
                session_id = f"wrong-{n}"
                records = [header(session_id), *ENTRIES]
                records[index] = {**records[index], key: value}
                yield session_id, jsonl(*records)


def good_session(root: Path, session_id: str = "good", notebook: str = "good.ipynb") -> Path:
    folder = root / session_id
    folder.mkdir(parents=True)
    (folder / SESSION_FILE).write_bytes(valid_log(session_id, notebook))
    (folder / BLOBS).mkdir()
    (folder / BLOBS / BLOB).write_bytes(b"png")
    return folder


def make_at(folder: Path, name: str, make: Make) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    make(folder / name)
    return folder / name


# ---------------------------------------------------------------- session log and header


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_session_log_is_listed_broken_naming_its_file(tmp_path: Path, case: str) -> None:
    repo = SessionRepository(tmp_path / "sessions")
    good_session(repo.root)
    make_at(repo.root / "hostile", SESSION_FILE, HOSTILE[case])

    summaries = {s.session_id: s for s in repo.summaries()}

    assert SESSION_FILE in (summaries["hostile"].broken or ""), summaries["hostile"]
    assert summaries["good"].broken is None and summaries["good"].turns == 1
    with pytest.raises(BrokenSession, match=re.escape(SESSION_FILE)):
        repo.load("hostile")
    hostile = repo.read("hostile")
    chat_transcript(hostile)
    branching.tree(hostile)
    family = Family(repo)
    assert family.member("hostile") is None and family.member("good") is not None
    assert repo.latest_for_notebook("good.ipynb") == "good"
    repo.load("good").context_messages()


@pytest.mark.parametrize("case", sorted(BYTE_CASES))
def test_a_hostile_line_in_a_session_log_is_skipped_as_torn_or_names_the_line(
    tmp_path: Path, case: str
) -> None:
    folder = tmp_path / "hostile"
    folder.mkdir()
    line = tmp_path / "line"
    BYTE_CASES[case](line)
    raw = line.read_bytes()
    (folder / SESSION_FILE).write_bytes(jsonl(header("hostile"), ENTRIES[0]) + raw + b"\n")

    log = SessionLog.read(folder)

    if log.damage is not None:
        assert re.match(rf"{re.escape(SESSION_FILE)}: line \d+[ :]", log.damage), log.damage
    else:  # a torn write: skipped, the session goes on
        assert log.skipped_lines or not raw.strip(b"\n \t\r")
        SessionLog.load(folder).close_interrupted_turn()
        assert SessionLog.load(folder).damage is None
    assert [e["id"] for e in log.entries][:1] == ["e1"]


def test_a_log_cut_at_any_byte_reads_as_torn_or_names_its_file(tmp_path: Path) -> None:
    valid = valid_log("cut")
    folder = tmp_path / "cut"
    folder.mkdir()
    for end in range(len(valid)):
        (folder / SESSION_FILE).write_bytes(valid[:end])
        log = SessionLog.read(folder)
        assert log.damage is None or log.damage.startswith(SESSION_FILE), (end, log.damage)
        chat_transcript(log)
        if log.damage is None:
            log.context_messages()


def test_every_field_of_the_wrong_type_is_damage_named_or_harmless(tmp_path: Path) -> None:
    repo = SessionRepository(tmp_path / "sessions")
    logs = dict(wrong_field_logs())
    for session_id, raw in logs.items():
        make_at(repo.root / session_id, SESSION_FILE, data(raw))

    summaries = {s.session_id: s for s in repo.summaries()}
    Family(repo).refresh()

    assert set(summaries) == set(logs)
    broken = 0
    for session_id in logs:
        log = repo.read(session_id)
        if log.damage is not None:
            assert log.damage.startswith(SESSION_FILE), log.damage
            broken += 1
        else:  # what the routes and the loop do with a readable log
            chat_transcript(log)
            history_records(log)
            branching.tree(log)
            branching.cells_by_branch(log)
            log.context_messages()
        json.dumps(chat_transcript(log), allow_nan=False)
    assert 0 < broken < len(logs)


# ---------------------------------------------------------------- image blobs


@pytest.mark.parametrize("case", ["fifo", "directory", "symlink-loop", "one-gibibyte", "empty"])
def test_a_hostile_image_blob_is_reported_missing_to_the_model(tmp_path: Path, case: str) -> None:
    folder = good_session(tmp_path)
    (folder / SESSION_FILE).write_bytes(jsonl(header("good"), *ENTRIES[:6]))  # not compacted
    (folder / BLOBS / BLOB).unlink()
    HOSTILE[case](folder / BLOBS / BLOB)

    messages = SessionLog.load(folder).context_messages()

    tool = next(m for m in messages if m.role == "tool")
    assert "1 image(s) of this output are missing on disk" in tool.text and not tool.images


# ---------------------------------------------------------------- mailbox


def queued(message_id: str, to: str, sender: str, body: str = "hello") -> dict[str, Any]:
    return {
        "type": "queued",
        "ts": "2026-01-01T00:00:02.000+00:00",
        "message_id": message_id,
        "to_session_id": to,
        "to_name": to,
        "from_session_id": sender,
        "from_name": sender,
        "relationship": "sibling",
        "composed": "2026-01-01T00:00:02.000+00:00",
        "mode": "auto",
        "body": body,
    }


def signed_mail(record: dict[str, Any]) -> Make:
    """A record signed with this user's secret, so the check under test is the one that
    refuses it (not the signature: docs/trust.md)."""

    def make(path: Path) -> None:
        path.write_bytes(jsonl(Signer.load().sign_object("mail", record)))

    return make


MAILBOX_SHAPES: dict[str, Make] = {
    "queued-for-another-session": signed_mail(queued("m2", "good", "sender")),
    "queued-with-a-path-as-sender": data(jsonl(queued("m3", "hostile", "../../etc"))),
    "fields-of-the-wrong-type": data(
        jsonl({**queued("m4", "hostile", "sender"), "body": 5, "mode": []})
    ),
    "message-id-not-text": data(jsonl({**queued("m5", "hostile", "sender"), "message_id": {}})),
}
MAILBOX_CASES = {
    **HOSTILE,
    **truncations(jsonl(queued("m9", "hostile", "sender", "€"))),
    **MAILBOX_SHAPES,
}


def headless(root: Path) -> HeadlessRun:
    """The CLI's runtime over `root`: its constructor recovers every mailbox, as a start does."""
    return HeadlessRun(
        cwd=root,
        notebook="good.ipynb",
        provider="scripted",
        model=None,
        script_path=None,
        stream=False,
        kernel_name="python3",
        settings=Settings(),
    )


@pytest.mark.parametrize("case", sorted(MAILBOX_CASES))
def test_a_hostile_mailbox_never_stops_a_start_nor_another_sessions_mail(
    tmp_path: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = tmp_path / ".prime-agent" / "sessions"
    good_session(sessions)
    good_session(sessions, "sender", "sender.ipynb")
    hostile = good_session(sessions, "hostile", "hostile.ipynb")
    # queued by an earlier run of this user: signed with the user's secret (docs/trust.md)
    signed = Signer.load().sign_object("mail", queued("m1", "good", "sender"))
    (sessions / "good" / MAILBOX_FILE).write_bytes(jsonl(signed))
    make_at(hostile, MAILBOX_FILE, MAILBOX_CASES[case])

    with caplog.at_level(logging.WARNING):
        run = headless(tmp_path)

    assert run.runtime.mailbox.pending("good") == 1  # only its own mailbox's message
    if case in ("fifo", "directory", "symlink-loop", "one-gibibyte"):
        assert f"{hostile / MAILBOX_FILE} " in caplog.text
    assert run.runtime.mailbox.pending("hostile") <= 1


# ---------------------------------------------------------------- harness stores


def harness_json(*entries: dict[str, Any]) -> bytes:
    body = {"schema": 1, "revision": 1, "entries": {"memory": {e["id"]: e for e in entries}}}
    return json.dumps(body, ensure_ascii=False).encode()


def memory(entry_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": entry_id, "kind": "memory", "title": entry_id, "content": "c €", **fields}


HARNESS_SHAPES: dict[str, Make] = {
    "entries-not-an-object": data(b'{"schema": 1, "entries": []}'),
    "kind-not-an-object": data(b'{"schema": 1, "entries": {"memory": [1]}}'),
    "entry-fields-of-the-wrong-type": data(
        harness_json(
            memory("a", version="x"),
            memory("b", title=[]),
            memory("c", reference=5, metadata="x"),
            memory("d", version=1e308),
            memory("e", path={"a": 1}, created_at=3),
        )
    ),
    "revision-not-a-number": data(b'{"schema": 1, "revision": "7", "entries": {}}'),
}
HARNESS_CASES = {**HOSTILE, **truncations(harness_json(memory("a"))), **HARNESS_SHAPES}


@pytest.mark.parametrize("scope", ["local", "global"])
@pytest.mark.parametrize("case", sorted(HARNESS_CASES))
def test_a_hostile_harness_store_names_its_file_and_hides_nothing_of_the_other(
    tmp_path: Path, case: str, scope: str
) -> None:
    local = HarnessStore(tmp_path / "local", "local")
    global_ = HarnessStore(tmp_path / "global", "global")
    harness = Harness(local, global_)
    good, bad = (global_, local) if scope == "local" else (local, global_)
    good.create("memory", {"title": "kept", "content": "still read"})
    make_at(bad.directory, STATE_FILE, HARNESS_CASES[case])

    entries, unavailable = harness.read_all()
    section = harness_section(harness)
    state = harness_state(harness)

    assert "kept" in [e.id for e in entries] and "still read" in section
    if unavailable:  # the whole file: named, and its writes refused without touching it
        assert len(unavailable) == 1 and str(bad.file) in unavailable[0], unavailable
        assert f"Unavailable: the harness file {bad.file}" in section
        assert harness.version()[scope] == -1
        assert any(str(bad.file) in p for p in state["problems"])
        with pytest.raises(HarnessError, match=re.escape(str(bad.file))):
            bad.create("memory", {"title": "x", "content": "y"})
    else:  # an object that reads: what does not fit is left out, and said
        assert case in HARNESS_SHAPES, case
        assert state["problems"] or case == "revision-not-a-number"
    json.dumps(state, allow_nan=False)


REFINEMENT_SHAPES: dict[str, Make] = {
    "records-of-the-wrong-shape": data(
        jsonl(
            {"id": 5},
            {"id": "r2", "edits": 5},
            {"id": "r3", "edits": [{"applied": True, "before": "x", "after": None}]},
            {"id": "r4", "summary": ["x"]},
            [1, 2],
        )
    ),
}
REFINEMENT_CASES = {
    **HOSTILE,
    **truncations(jsonl({"id": "r1", "summary": "€", "edits": []})),
    **REFINEMENT_SHAPES,
}


@pytest.mark.parametrize("case", sorted(REFINEMENT_CASES))
def test_hostile_refinement_records_are_named_and_the_other_store_still_listed(
    tmp_path: Path, case: str
) -> None:
    local = HarnessStore(tmp_path / "local", "local")
    global_ = HarnessStore(tmp_path / "global", "global")
    global_.append_refinement({"id": "refine_ok", "summary": "fine", "edits": []})
    make_at(local.directory, REFINEMENTS_FILE, REFINEMENT_CASES[case])

    records, problems = local.read_refinements()
    state = harness_state(Harness(local, global_))

    assert [r["id"] for r in state["refinements"]] == ["refine_ok"]
    assert records == [] and len(problems) <= 1
    if case not in ("empty",):
        assert any(REFINEMENTS_FILE in p for p in state["problems"]), state["problems"]


# ---------------------------------------------------------------- snapshots (kernel side)


class Shell:
    """What `prime_agent_kernel.snapshot` uses of an IPython shell."""

    def __init__(self, **names: Any) -> None:
        self.user_ns: dict[str, Any] = dict(names)
        self.user_ns_hidden: dict[str, Any] = {}
        self.execution_count = 1


MANIFEST_SHAPES: dict[str, Make] = {
    "saved-not-a-list": data(b'{"version": 1, "saved": 5}'),
    "imports-of-strings": data(b'{"version": 1, "imports": ["os"]}'),
    "a-file-outside-the-folder": data(
        json.dumps(
            {"version": 1, "saved": [{"name": "x", "file": "../../x.pkl", "method": "pickle"}]}
        ).encode()
    ),
    "skipped-of-numbers": data(b'{"version": 1, "skipped": [1, 2]}'),
}
MANIFEST_CASES = {
    **HOSTILE,
    **truncations(json.dumps({"version": 1, "time": "€", "saved": []}).encode()),
    **MANIFEST_SHAPES,
}


def snapshot_now(folder: Path, shell: Any) -> None:
    """What the host's `take_snapshot` does: the kernel saves, the host checks and commits."""
    kernel_snapshot.save(str(folder), shell=shell)
    commit_snapshot(folder, Signer.load())


@pytest.mark.parametrize("case", sorted(MANIFEST_CASES))
def test_a_hostile_manifest_is_refused_by_name_and_a_new_snapshot_replaces_it(
    tmp_path: Path, case: str
) -> None:
    folder = state_directory(tmp_path)
    manifest = make_at(folder, MANIFEST, MANIFEST_CASES[case])

    report = kernel_snapshot.restore(str(folder), shell=Shell())

    assert report["refused"] == "no snapshot" and str(manifest) in report["unreadable"], report
    kind, text = describe_restore(report)
    assert kind == NOT_RESTORED and str(manifest) in text
    if case not in MANIFEST_SHAPES:  # the host reads the file, the kernel its contents
        assert read_manifest(tmp_path) is None
    json.dumps(report, allow_nan=False)
    if case in ("directory",):
        return  # a directory is not replaced by a file
    snapshot_now(folder, Shell(x=41))  # the next snapshot replaces it
    fresh = Shell()
    assert kernel_snapshot.restore(str(folder), shell=fresh)["refused"] is None
    assert fresh.user_ns == {"x": 41}


@pytest.mark.parametrize("case", ["fifo", "directory", "symlink-loop", "one-gibibyte"])
def test_a_hostile_variable_file_fails_alone_and_never_blocks(tmp_path: Path, case: str) -> None:
    folder = str(state_directory(tmp_path))
    snapshot_now(Path(folder), Shell(x=1, y=2))
    saved = json.loads(Path(folder, MANIFEST).read_text())["saved"]
    victim = Path(folder, next(e["file"] for e in saved if e["name"] == "x"))
    victim.unlink()
    HOSTILE[case](victim)

    shell = Shell()
    report = kernel_snapshot.restore(folder, shell=shell)

    assert shell.user_ns == {"y": 2}
    [failed] = report["failed"]
    # a regular file of another size than was saved changed; anything else cannot be read
    why = "changed since the snapshot was taken" if case == "one-gibibyte" else "UnreadableFile"
    assert failed["name"] == "x" and why in failed["reason"]


class ReportWriter:
    """A kernel port whose silent execution writes `make`'s restore report."""

    def __init__(self, folder: Path, make: Make) -> None:
        self.folder, self.make = folder, make

    async def run_silently(self, code: str, timeout: float) -> dict[str, Any]:
        self.make(self.folder / RESTORE_REPORT)
        return {"status": "ok"}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_restore_report_is_a_failed_restore_not_a_crash(
    tmp_path: Path, case: str
) -> None:
    folder = state_directory(tmp_path)
    snapshot_now(folder, Shell(x=1))  # a snapshot of this user's, so the restore runs

    with pytest.raises(SnapshotFailed, match="no restore report"):
        asyncio.run(restore_snapshot(ReportWriter(folder, HOSTILE[case]), tmp_path, Signer.load()))


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_the_kernels_reader_agrees_with_the_hosts(tmp_path: Path, case: str) -> None:
    path = make_at(tmp_path, "file.json", HOSTILE[case])

    def outcome(read: Callable[[str], Any], error: type[Exception]) -> Any:
        try:
            return read(str(path))
        except error as exc:
            return str(exc)

    host = outcome(lambda p: read_json_object(p, kernel_files.MAX_MANIFEST_BYTES), UnreadableFile)
    kernel = outcome(kernel_files.read_json_object, kernel_files.UnreadableFile)
    assert host == kernel


# ---------------------------------------------------------------- notebooks (the CLI's reader)


NOTEBOOK_SHAPES: dict[str, Make] = {
    "cells-not-a-list": data(b'{"nbformat": 4, "nbformat_minor": 5, "cells": 5}'),
    "a-cell-not-an-object": data(b'{"nbformat": 4, "nbformat_minor": 4, "cells": [5]}'),
    "minor-not-a-number": data(b'{"nbformat": 4, "nbformat_minor": "5", "cells": []}'),
    "metadata-not-an-object": data(b'{"nbformat": 4, "cells": [], "metadata": []}'),
    "nbformat-not-a-number": data(b'{"nbformat": "4", "cells": []}'),
    "an-unknown-old-format": data(b'{"nbformat": 3, "worksheets": 7}'),
}
NOTEBOOK_CASES = {
    **HOSTILE,
    **truncations(json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": [], "x": "€"}).encode()),
    **NOTEBOOK_SHAPES,
}


@pytest.mark.parametrize("case", sorted(NOTEBOOK_CASES))
def test_a_hostile_notebook_is_refused_naming_the_file(tmp_path: Path, case: str) -> None:
    path = make_at(tmp_path, "agent.ipynb", NOTEBOOK_CASES[case])

    with pytest.raises(UnreadableFile) as refused:
        read_notebook(path)

    assert str(refused.value).startswith(str(path))


# ---------------------------------------------------------------- through a real server

SPECIAL_NOTEBOOKS: dict[str, Make] = {
    "deep.ipynb": HOSTILE["deep-array"],
    "huge-number.ipynb": HOSTILE["huge-int"],
    "big.ipynb": gigabyte,
}
TEXT_ONLY = {"turns": [{"text": "fine"}], "restart_each_message": True}
BODY_ROUTES: list[tuple[str, ...]] = [
    ("sessions",),
    ("sessions", "good", "messages"),
    ("sessions", "good", "stop"),
    ("sessions", "good", "leaf"),
    ("sessions", "good", "fork"),
    ("sessions", "good", "clone"),
    ("sessions", "good", "refine"),
    ("sessions", "good", "refinements", "r1", "rollback"),
    ("sessions", "good", "commands", "usage"),
    ("bindings",),
]
BODY_CASES = {name: make for name, make in BYTE_CASES.items() if name != "empty"}


def replace(path: Path, make: Make) -> None:
    """`path` made anew by `make`, whatever was there (a file, a pipe, a directory, a loop)."""
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    elif os.path.lexists(path):
        path.unlink()
    make(path)


def strict_json(body: bytes) -> Any:
    """What a browser's JSON.parse takes: no NaN or Infinity."""

    def refuse(literal: str) -> Any:
        raise AssertionError(f"{literal} in an answer")

    return json.loads(body, parse_constant=refuse)


@pytest.fixture
def seeded(jp_root_dir: Path, tmp_path: Path) -> dict[str, Any]:
    """A root folder full of hostile files, made before the server starts."""
    sessions = jp_root_dir / ".prime-agent" / "sessions"
    good_session(sessions)
    for case, make in HOSTILE.items():
        make_at(sessions / f"log-{case}", SESSION_FILE, make)
    for case, make in BYTE_CASES.items():
        (sessions / f"line-{case}").mkdir()
        raw = jsonl(header(f"line-{case}", f"line-{case}.ipynb"), ENTRIES[0])
        (sessions / f"line-{case}" / SESSION_FILE).write_bytes(raw)
        with open(sessions / f"line-{case}" / SESSION_FILE, "ab") as log:
            scratch = tmp_path / f"line-{case}"
            make(scratch)
            log.write(scratch.read_bytes() + b"\n")
    for case, make in MAILBOX_CASES.items():
        good_session(sessions, f"mail-{case}", f"mail-{case}.ipynb")
        make_at(sessions / f"mail-{case}", MAILBOX_FILE, make)
    wrong = list(wrong_field_logs())[::9]
    for session_id, raw in wrong:
        make_at(sessions / session_id, SESSION_FILE, data(raw))
    for name, make in SPECIAL_NOTEBOOKS.items():
        make(jp_root_dir / name)
    global_dir = tmp_path / "global-harness"
    make_at(global_dir, STATE_FILE, HOSTILE["deep-array"])
    return {"sessions": sessions, "global": global_dir, "wrong": [s for s, _ in wrong]}


@pytest.fixture
def prime_agent_config(seeded: dict[str, Any]) -> dict[str, Any]:
    return {"harness_dir": str(seeded["global"])}


async def call(jp_fetch: Any, method: str, *route: str, body: bytes | None = None) -> Any:
    response = await jp_fetch(
        "prime-agent", "api", *route, method=method, body=body, raise_error=False
    )
    assert response.code != 500, (route, response.body[:300])
    return response.code, strict_json(response.body) if response.body else None


async def test_a_server_over_hostile_files_starts_lists_attaches_and_names_each_file(
    jp_fetch: Any, host: Any, seeded: dict[str, Any], make_notebook: Any
) -> None:
    sessions: Path = seeded["sessions"]
    assert (await call(jp_fetch, "GET", "info"))[0] == 200  # the extension loaded

    code, listing = await call(jp_fetch, "GET", "sessions")
    listed = {s["session_id"]: s for s in listing["sessions"]}
    assert code == 200
    for case in HOSTILE:
        assert listed[f"log-{case}"]["status"] == "broken", case
        assert SESSION_FILE in listed[f"log-{case}"]["reason"], case
    for case in BYTE_CASES:  # a hostile line: damage that names the line, or a torn write
        line = listed[f"line-{case}"]
        assert line["status"] == "inactive" or line["reason"].startswith(SESSION_FILE), line
    for case in MAILBOX_CASES:
        assert listed[f"mail-{case}"]["status"] == "inactive", case
    for session_id in seeded["wrong"]:
        wrong = listed[session_id]
        assert wrong["status"] == "inactive" or wrong["reason"].startswith(SESSION_FILE), wrong
    assert listed["good"]["status"] == "inactive"

    path = make_notebook("good.ipynb")
    use_script(host, write_script(seeded["global"].parent, TEXT_ONLY))
    body = json.dumps({"notebook_path": path, "session_id": "good"}).encode()
    code, attached = await call(jp_fetch, "POST", "sessions", body=body)
    assert code == 200 and attached["session_id"] == "good", attached
    for case in HOSTILE:
        body = json.dumps({"notebook_path": path, "session_id": f"log-{case}"}).encode()
        code, refused = await call(jp_fetch, "POST", "sessions", body=body)
        assert code == 409 and SESSION_FILE in refused["message"], (case, refused)
        code, tree = await call(jp_fetch, "GET", "sessions", f"log-{case}", "tree")
        assert code == 200 and SESSION_FILE in tree["broken"], (case, tree)
    assert (await call(jp_fetch, "GET", "sessions", "good"))[0] == 200

    # Every turn of every session reads the global store: a hostile one is named in the
    # prompt, and the turn goes on.
    global_file = seeded["global"] / STATE_FILE
    for case, make in HARNESS_CASES.items():
        replace(global_file, make)
        ended = await run_turn(host, "good", f"turn with {case}")
        assert ended["stop_reason"] == "end_turn", (case, ended)
        prompt = host.runtime.system_prompt("good")
        try:
            HarnessStore(seeded["global"], "global").read()
        except HarnessError:
            assert f"Unavailable: the harness file {global_file}" in prompt, case

    # The refinement records of the session's own store.
    records = sessions / "good" / LOCAL_DIR / REFINEMENTS_FILE
    records.parent.mkdir(exist_ok=True)
    for case, make in REFINEMENT_CASES.items():
        replace(records, make)
        code, answer = await call(jp_fetch, "GET", "sessions", "good", "refinements")
        assert code == 200 and answer["refinements"] == [], (case, answer)
        if case != "empty":
            assert any(str(records) in p for p in answer["problems"]), (case, answer)

    # Request bodies: a clear 400, never a 500.
    for case, make in BODY_CASES.items():
        scratch = seeded["global"].parent / f"body-{case}"
        make(scratch)
        for route in BODY_ROUTES:
            code, answer = await call(jp_fetch, "POST", *route, body=scratch.read_bytes())
            assert code == 400 and answer["message"].startswith(
                ("the request body", "request body")
            ), (
                case,
                route,
                answer,
            )

    # Hostile notebooks are refused by name; the one the agent works in is untouched.
    for name in SPECIAL_NOTEBOOKS:
        body = json.dumps({"notebook_path": name}).encode()
        code, refused = await call(jp_fetch, "POST", "sessions", body=body)
        assert code == 400 and name in refused["message"], (name, refused)

    code, listing = await call(jp_fetch, "GET", "sessions")
    assert (
        code == 200
        and {s["session_id"]: s for s in listing["sessions"]}["good"]["status"] == "idle"
    )
    body = json.dumps({"notebook_path": path}).encode()
    assert (await call(jp_fetch, "POST", "sessions", body=body))[0] == 200


def write_script(folder: Path, script: dict[str, Any]) -> str:
    path = folder / "text-only-script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------- the CLI


def test_the_cli_names_a_hostile_notebook_in_one_line(tmp_path: Path) -> None:
    HOSTILE["deep-array"](tmp_path / "agent.ipynb")

    done = cli(tmp_path, "run", "hi")

    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"prime-agent-lab: {tmp_path / 'agent.ipynb'} is nested deeper than 100 levels"
    ], done.stderr


def test_the_cli_runs_beside_hostile_sessions_mailboxes_and_a_hostile_global_store(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / ".prime-agent" / "sessions"
    for case in ("deep-array", "fifo", "huge-int", "invalid-utf8", "one-gibibyte"):
        make_at(sessions / f"log-{case}", SESSION_FILE, HOSTILE[case])
        good_session(sessions, f"mail-{case}", f"mail-{case}.ipynb")
        make_at(sessions / f"mail-{case}", MAILBOX_FILE, HOSTILE[case])
    make_at(tmp_path / "global", STATE_FILE, HOSTILE["deep-array"])
    script = write_script(tmp_path, TEXT_ONLY)

    done = cli(tmp_path, "run", "--harness-dir", str(tmp_path / "global"), "--script", script, "hi")

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


# ---------------------------------------------------------------- skill modules (kernel side)


@pytest.mark.parametrize("case", SPECIAL_FILES)
def test_a_skill_module_that_is_no_regular_file_fails_its_import_at_once(
    tmp_path: Path, case: str
) -> None:
    from prime_agent_kernel.harness import SkillLoader

    module = make_at(tmp_path, "fit_tools.py", HOSTILE[case])

    with pytest.raises(ImportError, match=re.escape(str(module))):
        SkillLoader("fit_tools", str(module)).get_code("fit_tools")
