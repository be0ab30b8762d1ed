"""A full disk loses nothing that was written and never breaks a session (issue 15, item 3).

The scenarios run on a real 2 MB tmpfs (the tests run as root, here and in CI): a cell fills it,
then prints, so recording its result fails. The run ends with an error of kind `disk`; once the
space is back the session is listed, attaches by id and by notebook, survives a restart, and
the model's history is whole. A few unit tests inject the failure instead, so they also run
where mounting is not allowed.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from prime_agent_lab.adapters.file_notebook import FileNotebook, NotebookNotSaved
from prime_agent_lab.core import whole_writes
from prime_agent_lab.core.sessions import (
    SessionLog,
    SessionRepository,
    SessionWriteError,
)
from prime_agent_lab.core.whole_writes import append_whole, replace_whole

from .conftest import run_turn, use_script
from .test_cli import cli, json_lines
from .test_damaged_sessions import attach, header, jsonl, list_sessions
from .test_session_resume import restarted_host

DISK_BYTES = 2 * 1024 * 1024
FILLER = "fill.bin"

# Writes 64 KiB blocks until the disk refuses, then 30,000 characters of output: recording
# this cell's result is the append the full disk refuses.
FILL_THE_DISK = (
    "blocks = 0\n"
    "try:\n"
    f"    with open({FILLER!r}, 'wb') as f:\n"
    "        while True:\n"
    "            f.write(b'x' * 65536)\n"
    "            f.flush()\n"
    "            blocks += 1\n"
    "except OSError as exc:\n"
    "    print('disk full after', blocks, 'blocks:', exc.strerror)\n"
    "print('y' * 30000)"
)


def mount_small_disk(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")


def unmount(directory: Path) -> None:
    if subprocess.run(["umount", str(directory)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(directory)], check=True)  # a process still inside


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB filesystem of its own, unmounted after the test."""
    directory = tmp_path / "disk"
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the tests run as root here and in CI)")
    mount_small_disk(directory)
    yield directory
    unmount(directory)


def fill(directory: Path) -> Path:
    """Fill the filesystem of `directory` up to its last free page."""
    filler = directory / FILLER
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while True:
            os.write(fd, b"x" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def temporary_files(root: Path) -> list[str]:
    """Temporary files left anywhere under `root`, the kernel snapshot's folder included."""
    return [str(p.relative_to(root)) for p in root.rglob("*") if ".tmp" in p.name]


def assert_whole_tree(file: Path) -> list[dict[str, Any]]:
    """Every line a JSON record, every parent and leaf an entry written before it."""
    records = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]
    seen: set[str] = set()
    for record in records[1:]:
        if record["type"] == "leaf":
            assert record["leaf_id"] in seen, record
            continue
        assert record["parent_id"] is None or record["parent_id"] in seen, record
        seen.add(record["id"])
    return records


# ------------------------------------------------------------------ appends, injected failures


def fail_writes_to(monkeypatch: pytest.MonkeyPatch, target: Path, after: int) -> None:
    """os.write to `target` writes at most `after` bytes, then fails with ENOSPC (as a disk
    that fills mid-record does); other files are written as usual."""
    real_write = os.write
    budget = [after]

    def write(fd: int, data: bytes) -> int:
        if os.readlink(f"/proc/self/fd/{fd}") != str(target):
            return real_write(fd, data)
        if budget[0] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        count = real_write(fd, bytes(data[: budget[0]]))
        budget[0] -= count
        return count

    monkeypatch.setattr(whole_writes.os, "write", write)


def test_an_append_the_disk_cuts_short_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "records.jsonl"
    append_whole(file, b'{"n": 1}\n')
    fail_writes_to(monkeypatch, file, after=5)

    with pytest.raises(OSError) as raised:
        append_whole(file, b'{"n": 2, "text": "a record longer than five bytes"}\n')

    assert raised.value.errno == errno.ENOSPC
    assert file.read_bytes() == b'{"n": 1}\n'


def test_an_append_after_a_torn_last_line_starts_on_a_line_of_its_own(tmp_path: Path) -> None:
    file = tmp_path / "records.jsonl"
    file.write_bytes(b'{"n": 1}\n{"n": 2, "cut')  # a crash mid-write

    append_whole(file, b'{"n": 3}\n')

    assert file.read_bytes().splitlines()[-1] == b'{"n": 3}'


def test_a_failed_session_append_moves_nothing_and_the_next_entry_hangs_off_the_last_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SessionRepository(tmp_path).create(notebook_path="a.ipynb")
    first = log.append("user_message", text="hello", turn=1)
    before = log.file.read_bytes()
    with monkeypatch.context() as patch:
        fail_writes_to(patch, log.file, after=40)
        with pytest.raises(SessionWriteError, match="the disk is full"):
            log.append("tool_result", tool_call_id="c1", observation="y" * 5000, turn=1)
    assert log.file.read_bytes() == before
    assert log.leaf_id == first["id"] and len(log.entries) == 1

    after = log.append("turn_end", turn=1, stop_reason="error", final_text="")

    assert after["parent_id"] == first["id"]
    reloaded = SessionLog.load(log.directory)
    assert [e["id"] for e in reloaded.path()] == [first["id"], after["id"]]
    assert reloaded.skipped_lines == []


def test_a_session_whose_header_cannot_be_written_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = SessionRepository(tmp_path / "sessions")

    def no_room(path: Any, data: bytes, *, sync: bool = False) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr("prime_agent_lab.core.sessions.append_whole", no_room)
    with pytest.raises(SessionWriteError, match="the disk is full"):
        repo.create(notebook_path="a.ipynb")

    assert list(repo.root.iterdir()) == []  # no header-less session listed broken forever


class _HalfThenFull:
    """A file whose write stores half of the data, then finds the disk full."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __enter__(self) -> _HalfThenFull:
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()

    def write(self, data: bytes) -> int:
        self.handle.write(data[: len(data) // 2])
        self.handle.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self) -> None:
        self.handle.flush()

    def fileno(self) -> int:
        return int(self.handle.fileno())


def half_then_full(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> _HalfThenFull:
    return _HalfThenFull(open(file, mode, *args, **kwargs))


def test_a_notebook_that_cannot_be_written_keeps_its_previous_file_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "agent.ipynb"
    notebook = FileNotebook(path, output_cap=1000)
    notebook.nb["cells"].append({"cell_type": "markdown", "id": "a", "metadata": {}, "source": "1"})
    notebook.flush()
    saved = path.read_bytes()

    notebook.nb["cells"].append({"cell_type": "markdown", "id": "b", "metadata": {}, "source": "2"})
    with monkeypatch.context() as patch:
        patch.setattr(whole_writes, "open", half_then_full, raising=False)
        notebook.changed()  # a write meanwhile never raises into the running cell
        with pytest.raises(NotebookNotSaved, match="the disk is full"):
            notebook.flush()

    assert path.read_bytes() == saved
    assert [p.name for p in tmp_path.iterdir() if "agent" in p.name] == ["agent.ipynb"]
    notebook.flush()  # room again: the pending change is written
    assert [c.id for c in nbformat.read(path, as_version=4).cells] == ["a", "b"]


# ------------------------------------------------------------------ logs an older version wrote


def test_a_record_glued_after_a_torn_write_is_read_back_and_the_session_continues(
    tmp_path: Path,
) -> None:
    """Before appends were cut back, a write the disk cut short left a partial line and the next
    record went right after it; the entries below pointed at that record."""
    hello = {"id": "e1", "parent_id": None, "ts": "t", "type": "user_message", "text": "hi"}
    hello["turn"] = 1
    answer = {"id": "e2", "parent_id": "e1", "ts": "t", "type": "assistant_message", "text": "ok"}
    answer.update(turn=1, tool_calls=[{"id": "c1", "name": "python", "arguments": "{}"}])
    torn = b'{"id": "lost", "parent_id": "e1", "type": "tool_result", "observation": "yyy'
    after = {"id": "e3", "parent_id": "e2", "ts": "t", "type": "turn_end", "turn": 1}
    directory = tmp_path / "older-version"
    directory.mkdir()
    content = (
        jsonl(header("older-version"), hello)
        + torn
        + jsonl(answer, after)  # `answer` glued to the torn line, `after` hangs off it
    )
    (directory / "session.jsonl").write_bytes(content)

    log = SessionLog.load(directory)

    assert [e["id"] for e in log.path()] == ["e1", "e2", "e3"]
    assert log.damage is None and log.skipped_lines == [3]
    assert (directory / "session.jsonl").read_bytes() == content  # never rewritten


def test_a_line_torn_right_after_a_nested_object_is_skipped_like_any_torn_line(
    tmp_path: Path,
) -> None:
    hello = {"id": "e1", "parent_id": None, "ts": "t", "type": "user_message", "text": "hi"}
    hello["turn"] = 1
    directory = tmp_path / "torn-after-nested"
    directory.mkdir()
    (directory / "session.jsonl").write_bytes(
        jsonl(header("torn-after-nested"), hello)
        + b'{"id": "e2", "parent_id": "e1", "type": "assistant_message", "tool_calls": '
        + b'[{"id": "c1", "name": "python", "arguments": "{}"}'
    )

    log = SessionLog.load(directory)

    assert [e["id"] for e in log.path()] == ["e1"] and log.skipped_lines == [3]


def test_entries_below_a_torn_record_are_skipped_and_the_session_goes_on_from_the_rest(
    tmp_path: Path,
) -> None:
    """When the record an entry hangs off was lost in a torn line, that entry and everything
    below it are skipped; the session is not broken and continues from what was read whole."""
    hello = {"id": "e1", "parent_id": None, "ts": "t", "type": "user_message", "text": "hi"}
    orphan = {"id": "e3", "parent_id": "lost", "ts": "t", "type": "turn_end", "turn": 1}
    below = {"id": "e4", "parent_id": "e3", "ts": "t", "type": "user_message", "text": "x"}
    directory = tmp_path / "orphans"
    directory.mkdir()
    (directory / "session.jsonl").write_bytes(
        jsonl(header("orphans"), hello)
        + b'{"id": "lost", "parent_id": "e1", "type": "assis\n'
        + jsonl(orphan, below, {"type": "leaf", "leaf_id": "e4"})
    )

    log = SessionLog.load(directory)

    assert log.damage is None and log.orphaned_lines == [4, 5, 6]
    assert [e["id"] for e in log.path()] == ["e1"]
    follow = log.append("user_message", text="again", turn=2)
    assert follow["parent_id"] == "e1"
    assert [e["id"] for e in SessionLog.load(directory).path()] == ["e1", follow["id"]]


# ------------------------------------------------------------------ a real small disk: appends


def test_on_a_full_tmpfs_a_record_is_written_whole_or_not_at_all(small_disk: Path) -> None:
    log = SessionRepository(small_disk / "sessions").create(notebook_path="a.ipynb")
    first = log.append("user_message", text="hello", turn=1)
    filler = fill(small_disk)
    before = log.file.read_bytes()

    with pytest.raises(SessionWriteError, match="the disk is full"):
        log.append("tool_result", tool_call_id="c1", observation="y" * 20000, turn=1)
    with pytest.raises(OSError):
        replace_whole(small_disk / "agent.ipynb", b"x" * 20000)

    assert log.file.read_bytes() == before
    assert sorted(p.name for p in small_disk.iterdir()) == [FILLER, "sessions"]
    filler.unlink()
    after = log.append("turn_end", turn=1, stop_reason="error", final_text="")
    assert after["parent_id"] == first["id"]
    assert_whole_tree(log.file)


# ------------------------------------------------------------------ a real small disk: the CLI


def test_a_cli_run_whose_cell_fills_the_disk_says_so_in_one_line_and_continue_works_after(
    small_disk: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    turns = [{"text": "Filling.", "code": FILL_THE_DISK}, {"text": "Seen: {last_output}"}]
    script.write_text(json.dumps({"turns": turns}))

    full = cli(small_disk, "run", "--mode", "json", "--script", str(script), "fill the disk")

    assert full.returncode == 1
    records = json_lines(full.stdout)
    errors = [r for r in records if r["type"] == "error"]
    assert [e["kind"] for e in errors] == ["disk"], errors
    end = records[-1]
    assert end["type"] == "run_end" and end["ok"] is False
    assert "the disk is full" in end["error"] and "\n" not in end["error"]
    assert "Traceback" not in full.stderr, full.stderr
    assert temporary_files(small_disk) == []

    (small_disk / FILLER).unlink()  # the space comes back
    listed = SessionRepository(small_disk / ".prime-agent" / "sessions").summaries()
    assert [(s.session_id, s.broken) for s in listed] == [(Path(end["session_dir"]).name, None)]

    again = cli(small_disk, "run", "--mode", "json", "--continue", "--script", str(script), "go")

    assert again.returncode == 0, again.stderr
    records = json_lines(again.stdout)
    assert records[-1]["session_dir"] == end["session_dir"]  # the same session, not a new one
    assert [r["turn"] for r in records if r["type"] == "recovered"] == [1]
    # The scripted model plays its second step: it saw turn 1 with its cell's result.
    assert records[-1]["final_text"].startswith("Seen: ")
    assert "[interrupted]" in records[-1]["final_text"]
    log_records = assert_whole_tree(small_disk / end["session_dir"] / "session.jsonl")
    turn_ends = [r["turn"] for r in log_records if r["type"] == "turn_end"]
    assert turn_ends == [1, 2]
    assert temporary_files(small_disk) == []


def test_a_cli_run_in_text_mode_whose_cell_fills_the_disk_says_so_in_one_line(
    small_disk: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"code": FILL_THE_DISK}, {"text": "never"}]}))

    done = cli(small_disk, "run", "--script", str(script), "fill the disk")

    assert done.returncode == 1
    shown = [line for line in done.stdout.splitlines() if line.startswith("  error: ")]
    assert len(shown) == 1 and "(the disk is full: " in shown[0], done.stdout[-2000:]
    # the run's first lines name the model and where the kernels run
    provider, kernels, *lines = done.stderr.strip().splitlines()
    assert provider == "prime-agent-lab: provider scripted, model script.json", done.stderr
    assert kernels == "prime-agent-lab: kernels local (python3)", done.stderr
    # ... then one line says everything the disk cost
    assert len(lines) == 1 and lines[0].startswith("prime-agent-lab:"), done.stderr
    assert "the disk is full" in lines[0]
    assert "Traceback" not in done.stderr, done.stderr
    assert temporary_files(small_disk) == []


def test_a_cli_run_on_a_disk_that_is_already_full_says_so_in_one_line(
    small_disk: Path, tmp_path: Path
) -> None:
    fill(small_disk)

    done = cli(small_disk, "run", "hello")

    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()  # one line says everything the disk cost
    assert len(lines) == 1 and lines[0].startswith("prime-agent-lab:"), done.stderr
    assert "the disk is full" in lines[0]
    assert "Traceback" not in done.stderr, done.stderr
    files = [p.relative_to(small_disk) for p in small_disk.rglob("*") if not p.is_dir()]
    assert files == [Path(FILLER)]  # nothing half-made, no temporary file


# ------------------------------------------------------------------ a real small disk: the server


def error_events(events: Any) -> list[dict[str, Any]]:
    """The `error` events waiting in an EventBus subscription (the others are dropped)."""
    errors = []
    while not events.empty():
        event = events.get_nowait()
        if event["type"] == "error":
            errors.append(event)
    return errors


@pytest.fixture
def jp_root_dir(small_disk: Path) -> Path:
    """The server's root (and so its sessions) on the small disk."""
    return small_disk


async def test_a_server_turn_filling_the_disk_ends_with_a_disk_error_and_the_session_survives(
    host: Any,
    jp_fetch: Any,
    jp_serverapp: Any,
    jp_root_dir: Path,
    make_notebook: Any,
    agent_script: Any,
) -> None:
    script = agent_script(
        [
            {"text": "Filling.", "code": FILL_THE_DISK},
            {"text": "Seen: {last_output}"},
            {"code": "print('blocks', blocks > 0)"},
            {"text": "third: {last_output_line}"},
        ]
    )
    use_script(host, script)
    path = make_notebook("full.ipynb")
    agent = await host.attach(path)
    session_id = agent.session_id
    events = agent.events.subscribe()

    ended = await run_turn(host, session_id, "fill the disk")

    errors = error_events(events)
    assert ended["stop_reason"] == "error"
    assert [e["kind"] for e in errors] == ["disk"], errors
    assert "the disk is full" in errors[0]["message"]
    log_file = host.repository.root / session_id / "session.jsonl"
    written = log_file.read_bytes()

    still_full = await run_turn(host, session_id, "are you there?")

    assert still_full["stop_reason"] == "error"
    assert [e["kind"] for e in error_events(events)] == ["disk"]
    assert log_file.read_bytes() == written  # nothing half-written, nothing pointing nowhere

    (jp_root_dir / FILLER).unlink()  # the space comes back
    listed = await list_sessions(jp_fetch)
    assert listed[session_id]["status"] != "broken", listed[session_id]
    by_id = await attach(jp_fetch, notebook_path=path, session_id=session_id)
    assert by_id.code == 200, by_id.body
    by_notebook = await attach(jp_fetch, notebook_path=path)
    assert json.loads(by_notebook.body)["session_id"] == session_id

    second = await run_turn(host, session_id, "what did you see?")

    # The model was told the cell ran and what it printed, though its result was never logged.
    seen = second["final_text"]
    assert seen.startswith("Seen: [stdout]\ndisk full after"), seen[:200]
    assert "[not recorded] The session log could not be written" in seen, seen[-400:]
    await host.shutdown()

    again = restarted_host(host, script=script)
    jp_serverapp.web_app.settings["prime_agent_host"] = again
    try:
        listed = await list_sessions(jp_fetch)
        assert listed[session_id]["status"] != "broken", listed[session_id]
        resumed = await attach(jp_fetch, notebook_path=path, session_id=session_id)
        assert resumed.code == 200, resumed.body

        third = await run_turn(again, session_id, "and now?")

        assert third["final_text"] == "third: blocks True"  # same kernel, whole history
    finally:
        jp_serverapp.web_app.settings["prime_agent_host"] = host
        await again.shutdown()
    log_records = assert_whole_tree(log_file)
    assert [r["turn"] for r in log_records if r["type"] == "turn_end"] == [1, 2, 3]


async def test_a_server_restarted_on_a_full_disk_says_so_at_attach_and_continues_once_freed(
    host: Any,
    jp_fetch: Any,
    jp_serverapp: Any,
    jp_root_dir: Path,
    make_notebook: Any,
    agent_script: Any,
) -> None:
    script = agent_script(
        [{"text": "Filling.", "code": FILL_THE_DISK}, {"text": "Seen: {last_output_line}"}]
    )
    use_script(host, script)
    path = make_notebook("full.ipynb")
    session_id = (await host.attach(path)).session_id
    ended = await run_turn(host, session_id, "fill the disk")
    assert ended["stop_reason"] == "error"
    await host.shutdown()

    again = restarted_host(host, script=script)
    jp_serverapp.web_app.settings["prime_agent_host"] = again
    try:
        # Reopening closes the cut turn, which needs room: a plain 507, and nothing half-done.
        full = await attach(jp_fetch, notebook_path=path, session_id=session_id)
        assert full.code == 507, full.body
        assert "the disk is full" in json.loads(full.body)["message"]

        (jp_root_dir / FILLER).unlink()
        resumed = await attach(jp_fetch, notebook_path=path, session_id=session_id)
        assert resumed.code == 200, resumed.body
        listed = await list_sessions(jp_fetch)
        assert listed[session_id]["status"] != "broken", listed[session_id]

        second = await run_turn(again, session_id, "what did you see?")

        assert "[interrupted]" in second["final_text"], second["final_text"][:400]
    finally:
        jp_serverapp.web_app.settings["prime_agent_host"] = host
        await again.shutdown()
    log_records = assert_whole_tree(again.repository.root / session_id / "session.jsonl")
    assert [r["turn"] for r in log_records if r["type"] == "turn_end"] == [1, 2]
