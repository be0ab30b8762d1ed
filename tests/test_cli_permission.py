"""`run --permission ask|plan` on the terminal (docs/pairing.md, section 4): in ask mode each
agent cell waits for an answer read from stdin (a terminal, or a pipe as here); a stdin that can
give no answer is refused before anything starts; plan mode runs no cell."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import nbformat

from prime_agent_lab.cli_approval import QUESTION

from .test_cli import cli_with_env, json_lines


def two_cells(tmp_path: Path) -> str:
    script = tmp_path / "s.json"
    turns = [
        {"code": "print(6 * 7)"},
        {"code": "print('second')"},
        {"text": "done: {last_output_line}"},
    ]
    script.write_text(json.dumps({"turns": turns}))
    return str(script)


def run_asking(tmp_path: Path, answers: str | int, *more: str) -> subprocess.CompletedProcess[str]:
    args = ("run", "--mode", "json", "--script", two_cells(tmp_path), "--permission", "ask")
    return cli_with_env(tmp_path, {}, *args, *more, "go", stdin=answers)


def session_entries(tmp_path: Path, end: dict[str, Any]) -> list[dict[str, Any]]:
    lines = (tmp_path / end["session_dir"] / "session.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]


def test_ask_mode_runs_an_approved_cell_and_skips_a_refused_one(tmp_path: Path) -> None:
    done = run_asking(tmp_path, "y\nn\n")

    assert done.returncode == 0, done.stderr
    assert done.stderr.count(QUESTION) == 2
    records = json_lines(done.stdout)
    assert [r["type"] for r in records].count("cell_awaiting_approval") == 2
    end = records[-1]
    results = [e for e in session_entries(tmp_path, end) if e["type"] == "tool_result"]
    assert [r["status"] for r in results] == ["ok", "skipped"]
    assert "42" in results[0]["observation"]
    assert "the user skipped this cell" in results[1]["observation"]
    nb = nbformat.read(tmp_path / end["notebook"], as_version=4)
    assert [c.metadata["prime_agent"].get("permission") for c in nb.cells] == ["ask", "ask"]
    assert "skipped: not run" in nb.cells[1].outputs[-1]["text"]


def test_ask_mode_runs_the_code_typed_after_edit(tmp_path: Path) -> None:
    done = run_asking(tmp_path, "e\nprint(6 * 9)\n.\ny\n")

    assert done.returncode == 0, done.stderr
    end = json_lines(done.stdout)[-1]
    entries = session_entries(tmp_path, end)
    results = [e for e in entries if e["type"] == "tool_result"]
    assert "54" in results[0]["observation"] and results[1]["status"] == "ok"
    (approval, _) = [e for e in entries if e["type"] == "cell_approval"]
    assert (approval["decision"], approval["code"]) == ("edit", "print(6 * 9)")


def test_ask_mode_skips_what_a_stdin_that_ended_cannot_answer(tmp_path: Path) -> None:
    done = run_asking(tmp_path, "y\n")

    assert done.returncode == 0, done.stderr
    assert "stdin ended: the cell is skipped" in done.stderr
    end = json_lines(done.stdout)[-1]
    results = [e for e in session_entries(tmp_path, end) if e["type"] == "tool_result"]
    assert [r["status"] for r in results] == ["ok", "skipped"]


def test_ask_mode_skips_an_edit_the_input_ended_in_the_middle_of(tmp_path: Path) -> None:
    done = run_asking(tmp_path, "e\nimport os\nprint('partial')\n")

    assert done.returncode == 0, done.stderr
    assert "stdin ended before the edit's closing '.': the cell is skipped" in done.stderr
    end = json_lines(done.stdout)[-1]
    entries = session_entries(tmp_path, end)
    results = [e for e in entries if e["type"] == "tool_result"]
    assert [r["status"] for r in results] == ["skipped", "skipped"]
    assert not any("partial" in r["observation"] for r in results)
    assert not any(e["type"] == "cell_started" for e in entries)


def test_ask_mode_with_a_stdin_that_gives_no_answers_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    done = run_asking(tmp_path, subprocess.DEVNULL)

    assert done.returncode == 2
    assert "cannot ask for approval of cells: stdin is not a terminal" in done.stderr
    assert "--permission auto or plan" in done.stderr
    assert not (tmp_path / "agent.ipynb").exists() and not (tmp_path / ".prime-agent").exists()


def test_continuing_an_ask_session_with_a_stdin_that_gives_no_answers_is_refused_first(
    tmp_path: Path,
) -> None:
    first = run_asking(tmp_path, "y\ny\n")
    assert first.returncode == 0, first.stderr
    log = tmp_path / json_lines(first.stdout)[-1]["session_dir"] / "session.jsonl"
    before = log.read_bytes()

    script = two_cells(tmp_path)
    for how in (("--continue",), ("--resume", log.parent.name)):
        args = ("run", "--mode", "json", "--script", script, *how, "again")
        again = cli_with_env(tmp_path, {}, *args, stdin=subprocess.DEVNULL)

        assert again.returncode == 2, again.stderr
        assert "cannot ask for approval of cells: stdin is not a terminal" in again.stderr
        assert "Traceback" not in again.stderr and "snapshot" not in again.stderr
        assert log.read_bytes() == before


def test_plan_mode_runs_no_cell_and_a_continued_session_keeps_it(tmp_path: Path) -> None:
    script = two_cells(tmp_path)
    args = ("run", "--mode", "json", "--script", script)
    first = cli_with_env(tmp_path, {}, *args, "--permission", "plan", "go")
    assert first.returncode == 0, first.stderr
    end = json_lines(first.stdout)[-1]
    results = [e for e in session_entries(tmp_path, end) if e["type"] == "tool_result"]
    assert {r["status"] for r in results} == {"skipped"} and all(
        "plan mode" in r["observation"] for r in results
    )
    assert nbformat.read(tmp_path / end["notebook"], as_version=4).cells == []

    again = cli_with_env(tmp_path, {}, *args, "--continue", "again")
    assert again.returncode == 0, again.stderr
    entries = session_entries(tmp_path, json_lines(again.stdout)[-1])
    assert not any(e["type"] == "cell_started" for e in entries)
    assert [e["mode"] for e in entries if e["type"] == "permission_change"] == ["plan"]


def test_ask_mode_asks_for_a_sub_agents_cell_on_the_same_terminal(tmp_path: Path) -> None:
    script = tmp_path / "tree.json"
    turns = {
        "turns": [{"code": 'a = await rlm("alpha", name="part-a")'}, {"text": "spawned"}],
        "child": {"turns": [{"code": "print('child ran')"}, {"text": "child done"}]},
    }
    script.write_text(json.dumps(turns))
    args = ("run", "--mode", "json", "--script", str(script), "--permission", "ask", "go")
    done = cli_with_env(tmp_path, {}, *args, stdin="y\ny\n")

    assert done.returncode == 0, done.stderr
    assert done.stderr.count(QUESTION) == 2
    child_results = [
        json.loads(line)
        for path in (tmp_path / ".prime-agent" / "sessions").glob("*/session.jsonl")
        for line in path.read_text().splitlines()[1:]
        if '"tool_result"' in line and "child ran" in line
    ]
    assert [r["status"] for r in child_results] == ["ok"]
