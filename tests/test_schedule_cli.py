"""`prime-agent-lab schedule` from the terminal (docs/autonomy.md): it writes the session's
signed schedules file (owner `cli`), and a schedule fires in a `prime-agent-lab run` while the
run is alive, shown in `--mode json` as `heartbeat` events."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

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
