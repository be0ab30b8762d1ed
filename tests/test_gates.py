"""Gates (core/gates.py) and the workspace fingerprint (core/fingerprint.py) that decides whether
a failed gate may run again."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from prime_agent_lab.core.fingerprint import harness_paths, workspace_fingerprint
from prime_agent_lab.core.gates import (
    Gate,
    cut_output,
    parse_gate,
    python_check,
    run_shell_gate,
)
from prime_agent_lab.core.whole_writes import replacing


def _run(gate: str, cwd: Path, timeout: float = 30.0, limit: int = 6000):  # type: ignore[no-untyped-def]
    return asyncio.run(run_shell_gate(Gate(gate), cwd, timeout, limit))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (not reaped yet by its adoptive parent) is dead for our purpose
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def _gone_soon(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_shell_gate_runs_in_the_folder_and_merges_stdout_and_stderr(tmp_path: Path) -> None:
    result = _run("pwd; echo out; echo err >&2; exit 3", tmp_path)
    assert (result.exit_status, result.passed) == (3, False)
    assert result.output.splitlines() == [str(tmp_path), "out", "err"]
    assert result.first_line == str(tmp_path)
    assert _run("true", tmp_path).passed


def test_a_long_output_keeps_its_head_and_tail_with_a_line_saying_what_was_cut(
    tmp_path: Path,
) -> None:
    result = _run("seq 1 100000", tmp_path, limit=1000)
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.rstrip().endswith("99999\n100000")
    assert "characters of the gate's output cut" in result.output
    assert len(result.output) < 1100
    whole = "\n".join(str(i) for i in range(1, 100001)) + "\n"
    assert result.output == cut_output(whole, 1000)


def test_a_gate_past_its_timeout_is_killed_with_its_grandchildren(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    started = time.monotonic()
    result = _run(f"sh -c 'sleep 300 & echo $! > {pidfile}; wait'", tmp_path, timeout=1.0)
    assert time.monotonic() - started < 10
    assert (result.exit_status, result.timed_out, result.passed) == (None, True, False)
    assert "killed after 1 s" in result.output
    assert _gone_soon(int(pidfile.read_text()))


def test_cancelling_a_gate_kills_its_process_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"

    async def cancel_it() -> None:
        task = asyncio.ensure_future(
            run_shell_gate(Gate(f"sleep 300 & echo $! > {pidfile}; wait"), tmp_path, 60, 6000)
        )
        while not pidfile.exists() or not pidfile.read_text().strip():
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_it())
    assert _gone_soon(int(pidfile.read_text()))


def test_a_gate_that_leaves_a_process_behind_ends_and_the_process_is_killed(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "left.pid"
    result = _run(f"sleep 300 & echo $! > {pidfile}; echo done", tmp_path, timeout=20)
    assert (result.exit_status, result.output.strip()) == (0, "done")
    assert _gone_soon(int(pidfile.read_text()))


def _running(pattern: str) -> list[int]:
    """The live processes whose command line is exactly `pattern` (a `sleep N` of a test)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip()
            except OSError:
                continue
            if command.decode() == pattern and _alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def test_cancelling_a_gate_kills_the_processes_that_left_its_group_too(tmp_path: Path) -> None:
    # `setsid` moves one out of the gate's process group; in a subshell that exits at once, it
    # is reparented away from the gate's shell too; only its environment still says whose it is
    token = f"{os.getpid()}{time.monotonic_ns() % 10_000}"
    sleepers = [f"sleep 34{token}1", f"sleep 34{token}2", f"sleep 34{token}3"]
    command = (
        f"{sleepers[0]} & (setsid {sleepers[2]} &); setsid {sleepers[1]} & sleep 0.2; "
        "sleep 300; false"
    )

    async def cancel_it() -> None:
        task = asyncio.ensure_future(run_shell_gate(Gate(command), tmp_path, 60, 6000))
        while not all(_running(s) for s in sleepers):
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(cancel_it())
        for sleeper in sleepers:
            assert all(_gone_soon(pid) for pid in _running(sleeper)), sleeper
    finally:
        for sleeper in sleepers:
            for pid in _running(sleeper):
                os.kill(pid, 9)


@pytest.mark.parametrize(
    "gate, says",
    [
        ("py:auc = 0.91", "this is an `Assign` statement"),
        ("py:x == 1; auc = 0.91", "this is 2 statements"),
        ("py:import os", "this is an `Import` statement"),
        ("py:(auc := 0.91) > 0", "this is an assignment (:=)"),
    ],
)
def test_a_python_gate_that_would_change_the_kernel_is_refused(gate: str, says: str) -> None:
    with pytest.raises(ValueError, match="must be one `assert` statement or one expression") as no:
        parse_gate(gate)
    assert says in str(no.value)


def test_python_gates_are_an_assert_statement_or_an_expression_that_must_be_true() -> None:
    assert parse_gate("py:assert x == 1").kind == "python"
    assert parse_gate("py: x == 1").source == "x == 1"
    assert python_check("assert x == 1") == "assert x == 1"
    namespace: dict[str, object] = {"x": 2}
    with pytest.raises(AssertionError, match="not true: x == 1"):
        exec(python_check("x == 1"), namespace)
    exec(python_check("x == 2"), namespace)
    with pytest.raises(SyntaxError):
        parse_gate("py:assert (")
    with pytest.raises(ValueError, match="not empty"):
        parse_gate("  ")
    assert parse_gate("pytest -q").kind == "shell"


# ---------------------------------------------------------------- the fingerprint


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "tracked.txt").write_text("one\n")
    (repo / ".gitignore").write_text("ignored/\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "init")
    return repo


@pytest.mark.parametrize("in_git", [True, False])
def test_the_harness_files_do_not_change_the_fingerprint(tmp_path: Path, in_git: bool) -> None:
    folder = _repo(tmp_path) if in_git else tmp_path / "plain"
    folder.mkdir(exist_ok=True)
    (folder / "data.csv").write_text("a,b\n")
    excluded = harness_paths("agent.ipynb")
    before = workspace_fingerprint(folder, excluded)
    # what every turn writes: the session log, the notebook, a sub-agent's notebook, checkpoints
    (folder / ".prime-agent" / "sessions" / "s1").mkdir(parents=True)
    (folder / ".prime-agent" / "sessions" / "s1" / "session.jsonl").write_text("{}\n")
    (folder / "agent.ipynb").write_text('{"cells": []}')
    (folder / "agent.agents").mkdir()
    (folder / "agent.agents" / "child.ipynb").write_text("{}")
    (folder / ".ipynb_checkpoints").mkdir()
    (folder / ".ipynb_checkpoints" / "x-checkpoint.ipynb").write_text("{}")
    assert workspace_fingerprint(folder, excluded) == before


@pytest.mark.parametrize("in_git", [True, False])
def test_the_notebook_being_saved_while_the_fingerprint_is_taken_does_not_change_it(
    tmp_path: Path, in_git: bool
) -> None:
    # The CLI saves its notebook on a timer while a gate's fingerprint is taken in a thread: the
    # temporary file the save writes through was seen as a new file once (a failed gate ran again).
    folder = _repo(tmp_path) if in_git else tmp_path / "plain"
    folder.mkdir(exist_ok=True)
    (folder / "sub").mkdir()
    excluded = harness_paths("agent.ipynb") + harness_paths("sub/child.ipynb")
    before = workspace_fingerprint(folder, excluded)
    with replacing(folder / "agent.ipynb") as saving, replacing(folder / "sub/child.ipynb") as sub:
        saving.write('{"cells": []}')
        sub.write("{}")
        assert len(list(folder.glob(".agent.ipynb.*.tmp"))) == 1
        assert workspace_fingerprint(folder, excluded) == before
    # another file's temporary still counts: only the excluded files' are left out
    with replacing(folder / "data.csv") as data:
        data.write("a,b\n")
        assert workspace_fingerprint(folder, excluded) != before


def test_in_git_tracked_edits_and_untracked_contents_change_the_fingerprint(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    clean = workspace_fingerprint(repo)
    (repo / "ignored").mkdir()
    (repo / "ignored" / "cache.bin").write_bytes(b"\0" * 10)
    assert workspace_fingerprint(repo) == clean, "an ignored file is not the workspace"
    (repo / "new.txt").write_text("v1")
    untracked = workspace_fingerprint(repo)
    assert untracked != clean
    (repo / "new.txt").write_text("v2")  # same name, same size: only the content differs
    assert workspace_fingerprint(repo) != untracked
    (repo / "new.txt").unlink()
    assert workspace_fingerprint(repo) == clean
    (repo / "tracked.txt").write_text("two\n")
    edited = workspace_fingerprint(repo)
    (repo / "tracked.txt").write_text("six\n")
    assert edited not in (clean, workspace_fingerprint(repo))


def test_outside_git_every_file_counts_and_hashing_stops_at_the_cap(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("aaaa")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("bbbb")
    first = workspace_fingerprint(tmp_path)
    assert first.note is None
    (tmp_path / "sub" / "b.txt").write_text("bbbc")
    second = workspace_fingerprint(tmp_path)
    assert second != first
    capped = workspace_fingerprint(tmp_path, cap=5)
    assert capped.note is not None and "1 files past" in capped.note


def test_a_walk_stops_past_the_file_limit_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("prime_agent_lab.core.fingerprint.MAX_FILES", 3)
    for index in range(5):
        (tmp_path / f"f{index}.txt").write_text(str(index))
    found = workspace_fingerprint(tmp_path)
    assert found.note == "files past the first 3 were not compared"


def test_a_process_that_left_the_gate_s_session_cannot_hold_the_gate_open(tmp_path: Path) -> None:
    pidfile = tmp_path / "escaped.pid"
    started = time.monotonic()
    # out of the gate's session, its tree (reparented once the shell exits) and, without the
    # gate's mark in its environment, out of reach: the escape docs/autonomy.md names
    escape = f"setsid env -i PATH=\"$PATH\" sh -c 'echo $$ > {pidfile}; exec sleep 60' &"
    wait = f"while [ ! -s {pidfile} ]; do sleep 0.01; done"
    result = _run(f"{escape} {wait}; echo hi", tmp_path, timeout=30)
    try:
        assert time.monotonic() - started < 20
        assert result.exit_status == 0
        assert result.output.startswith("hi\n")
        assert "a process the gate started holds it" in result.output
    finally:
        os.kill(int(pidfile.read_text()), 9)


def test_a_gate_whose_folder_is_gone_fails_with_a_clear_output(tmp_path: Path) -> None:
    result = _run("true", tmp_path / "gone")
    assert (result.exit_status, result.passed) == (127, False)
    assert result.output.startswith(f"the gate could not start in {tmp_path / 'gone'}: ")
