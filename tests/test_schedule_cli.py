"""`prime-agent-lab schedule` from the terminal (docs/autonomy.md): it writes the session's
signed schedules file (owner `cli`), and a schedule fires in a `prime-agent-lab run` while the
run is alive, shown in `--mode json` as `heartbeat` events."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prime_agent_lab.core.schedules import SCHEDULES_FILE
from prime_agent_lab.core.sessions import SessionRepository

from .test_cli import cli, json_lines


def script(tmp_path: Path, name: str, turns: list[dict[str, str]]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"turns": turns}), encoding="utf-8")
    return str(path)


def test_schedule_add_list_and_remove_with_clear_errors(tmp_path: Path) -> None:
    missing = cli(tmp_path, "schedule", "add", "agent.ipynb", "in 5m", "--", "hi")
    assert missing.returncode == 1 and "no session of 'agent.ipynb'" in missing.stderr
    first = cli(tmp_path, "run", "--script", script(tmp_path, "s.json", [{"text": "hi"}]), "hello")
    assert first.returncode == 0, first.stderr

    added = cli(tmp_path, "schedule", "add", "agent.ipynb", "in 30m", "--", "summarise", "it")
    assert added.returncode == 0, added.stderr
    job_id = added.stdout.split(":")[0]
    assert job_id.startswith("job_") and "in 30m for session" in added.stdout
    cron = cli(
        tmp_path, "schedule", "add", "agent.ipynb", "0 9 * * mon-fri", "--follow-up", "--", "plan"
    )
    assert cron.returncode == 0 and "(follow-up)" in cron.stdout
    bad = cli(tmp_path, "schedule", "add", "agent.ipynb", "every 5s", "--", "x")
    assert bad.returncode == 1 and "at most every 10 seconds" in bad.stderr

    listed = cli(tmp_path, "schedule", "list")
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{job_id}  ") and "cli" in lines[0]
    assert "summarise it" in lines[0] and "0 9 * * mon-fri" in lines[1]

    removed = cli(tmp_path, "schedule", "remove", job_id)
    assert removed.returncode == 0 and f"removed {job_id}" in removed.stdout
    again = cli(tmp_path, "schedule", "remove", job_id)
    assert again.returncode == 1 and "no scheduled job" in again.stderr
    assert len(cli(tmp_path, "schedule", "list").stdout.splitlines()) == 1


def test_a_schedule_fires_while_a_run_is_alive_and_shows_in_json_mode(tmp_path: Path) -> None:
    first = cli(tmp_path, "run", "--script", script(tmp_path, "s1.json", [{"text": "hi"}]), "hello")
    assert first.returncode == 0, first.stderr
    due = (datetime.now(UTC) + timedelta(seconds=8)).isoformat(timespec="seconds")
    added = cli(tmp_path, "schedule", "add", "agent.ipynb", f"at {due}", "--", "look at the log")
    assert added.returncode == 0, added.stderr

    turns = [
        {"text": "hi"},
        {"code": "import time\ntime.sleep(20)\nprint('slept')"},
        {"text": "done"},
    ]
    run = cli(
        tmp_path,
        "run",
        "--continue",
        "--mode",
        "json",
        "--script",
        script(tmp_path, "s2.json", turns),
        "wait a while",
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    records = json_lines(run.stdout)
    beats = [(r["phase"], r["owner"]) for r in records if r["type"] == "heartbeat"]
    assert beats == [("claimed", "cli"), ("delivered", "cli")]
    (tick,) = [r for r in records if r["type"] == "agent_message"]  # steered into the turn
    assert tick["schedule_owner"] == "cli" and tick["text"].endswith("\nlook at the log")
    assert tick["text"].startswith('[scheduled message "look at the log" (set from the terminal')
    listed = cli(tmp_path, "schedule", "list").stdout
    assert " completed " in listed and "runs 1" in listed


def test_schedule_add_refuses_huge_past_never_matching_times_and_unsafe_labels_clearly(
    tmp_path: Path,
) -> None:
    repository = SessionRepository(tmp_path / ".prime-agent" / "sessions")
    session = repository.create(notebook_path="agent.ipynb")
    for when, label, says in (
        ("every 99999999999999999999h", None, "at most 366 days"),
        ("in 99999999999d", None, "at most 10 years"),
        ("at 1999-01-01T00:00Z", None, "is in the past"),
        ("0 0 31 2 *", None, "never matches"),
        ("every \u0661\u0660s", None, "N s|m|h"),
        ("in 5m", "a\x1b[2J", "control character"),
        ("in 5m", "two\nlines", "control character"),
        ("in 5m", "x" * 81, "1 to 80 characters"),
    ):
        label_args = [] if label is None else ["--label", label]
        done = cli(tmp_path, "schedule", "add", session.session_id, when, *label_args, "--", "hi")
        assert done.returncode == 1, (when, label, done.stdout)
        assert says in done.stderr and "Traceback" not in done.stderr, (when, done.stderr)
        assert done.stderr.startswith("prime-agent-lab schedule: ")
    assert not (session.directory / SCHEDULES_FILE).exists()


def test_schedule_list_and_run_continue_print_control_characters_escaped(tmp_path: Path) -> None:
    first = cli(tmp_path, "run", "--script", script(tmp_path, "s1.json", [{"text": "hi"}]), "hello")
    assert first.returncode == 0, first.stderr
    (directory,) = (tmp_path / ".prime-agent" / "sessions").iterdir()
    job = {  # an unsigned file from someone else's folder: nothing of it runs, all of it prints
        "id": "hb_1",
        "owner": "cli",
        "status": "active",
        "delivery_mode": "steer",
        "instruction": "x\x1b[2J",
        "label": "\x1b]0;TITLE\x07\x1b[31mred\rX",
        "schedule": {"kind": "every", "expression": "every 1h\x1b[2J", "interval_s": 3600},
        "next_run_at": "\x1b[5m",
        "last_error": "\x1b[1Aup",
        "run_count": 0,
    }
    (directory / SCHEDULES_FILE).write_text(
        json.dumps({"version": 1, "jobs": [job], "dispatches": []}), encoding="utf-8"
    )

    listed = cli(tmp_path, "schedule", "list")
    assert listed.returncode == 0, listed.stderr
    assert not any(c in listed.stdout for c in "\x1b\x07\r"), listed.stdout
    assert "\\x1b]0;TITLE\\x07\\x1b[31mred\\rX" in listed.stdout
    assert "every 1h\\x1b[2J" in listed.stdout and "\\x1b[1Aup" in listed.stdout

    turns = [{"text": "again"}]
    continued = cli(
        tmp_path, "run", "--continue", "--script", script(tmp_path, "s2.json", turns), "go on"
    )
    assert continued.returncode == 0, continued.stderr
    assert not any(c in continued.stdout for c in "\x1b\x07\r"), continued.stdout
    assert 'the first says "x\\x1b[2J"' in continued.stdout
    assert "\n- agent.ipynb: " in continued.stdout  # the note keeps its own line breaks
