"""Heartbeats across a real `jupyter lab` restart and a SIGKILL between a tick's claim and its
delivery (issue 17's schedule acceptance). The server is a subprocess (`tests/lab_process.py`)
on the scripted provider; the test talks to it over REST and reads the session folder.

The crash window is real: `PRIME_AGENT_LAB_TEST_PAUSE_AFTER_CLAIM` makes the server wait between
writing the claim and journaling the tick's message, and the test kills it there.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import nbformat
import pytest

from prime_agent_lab.core.scheduler import PAUSE_AFTER_CLAIM_ENV
from prime_agent_lab.core.schedules import INTERRUPTED

from .lab_fixtures import (  # noqa: F401  (fixtures: a subprocess server, no in-process one)
    jp_asyncio_loop,
    jp_server_cleanup,
    servers,
    start_server,
)
from .lab_process import LabServer, shutdown
from .test_server_crash import entries, wait_until

SCRIPT: dict[str, Any] = {"turns": [{"text": "tick seen"}], "restart_each_message": True}


def open_root(server: LabServer) -> str:
    """Open (or reopen) the root notebook's agent, as a tab does; its session id."""
    answer = server.api("POST", "prime-agent/api/sessions", {"notebook_path": "analysis.ipynb"})
    return str(answer["session_id"])


def set_heartbeat(server: LabServer, session_id: str, args: str) -> str:
    path = f"prime-agent/api/sessions/{session_id}/commands/heartbeat"
    return str(server.api("POST", path, {"args": args})["answer"]["text"])


def schedules(base: Path, session_id: str) -> dict[str, Any]:
    path = base / "sessions" / session_id / "schedules.json"
    return json.loads(path.read_text()) if path.exists() else {"jobs": [], "dispatches": []}


def ticks(base: Path, session_id: str) -> list[dict[str, Any]]:
    return [e for e in entries(base, session_id) if e.get("schedule_id")]


def journaled_ticks(base: Path, session_id: str) -> list[dict[str, Any]]:
    mailbox = base / "sessions" / session_id / "mailbox.jsonl"
    if not mailbox.exists():
        return []
    records = [json.loads(line) for line in mailbox.read_text().splitlines() if line.strip()]
    return [r for r in records if r["type"] == "queued" and "origin" in r]


def test_a_tick_killed_between_claim_and_delivery_is_interrupted_and_never_replayed(
    tmp_path: Path,
    servers: list[LabServer],  # noqa: F811  (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = tmp_path
    monkeypatch.setenv(PAUSE_AFTER_CLAIM_ENV, "120")
    server = start_server(base, servers, SCRIPT)
    nbformat.write(nbformat.v4.new_notebook(), server.root_dir / "analysis.ipynb")
    root_id = open_root(server)
    set_heartbeat(server, root_id, "every 10s check the log")

    def claimed() -> Any:
        return [d for d in schedules(base, root_id)["dispatches"] if d["state"] == "open"]

    (lost,) = wait_until(claimed, "the tick to be claimed", server)
    os.kill(server.process.pid, signal.SIGKILL)  # inside the claim-to-delivery window
    server.process.wait(timeout=30)
    assert journaled_ticks(base, root_id) == [] and ticks(base, root_id) == []

    monkeypatch.delenv(PAUSE_AFTER_CLAIM_ENV)
    again = start_server(base, servers, SCRIPT)
    stored = schedules(base, root_id)
    states = {d["id"]: d["state"] for d in stored["dispatches"]}
    assert states[lost["id"]] == "interrupted"
    (job,) = stored["jobs"]
    assert job["last_error"] == INTERRUPTED and job["run_count"] == 1

    # the heartbeat goes on after the restart: the next tick, never the lost one
    assert open_root(again) == root_id
    (tick,) = wait_until(lambda: ticks(base, root_id), "a tick after the restart", again)
    assert tick["scheduled_for"] != lost["scheduled_for"]
    (journaled,) = journaled_ticks(base, root_id)
    assert journaled["message_id"] == tick["message_id"]
    dispatches = schedules(base, root_id)["dispatches"]
    assert [d["state"] for d in dispatches if d["id"] == lost["id"]] == ["interrupted"]
    assert not any(d.get("message_id") and d["id"] == lost["id"] for d in dispatches)


def test_a_heartbeat_fires_after_a_server_restart(
    tmp_path: Path,
    servers: list[LabServer],  # noqa: F811  (the fixture imported above)
) -> None:
    base = tmp_path
    server = start_server(base, servers, SCRIPT)
    nbformat.write(nbformat.v4.new_notebook(), server.root_dir / "analysis.ipynb")
    root_id = open_root(server)
    said = set_heartbeat(server, root_id, "every 10s --follow-up check the log")
    assert "follow-up" in said
    wait_until(lambda: len(ticks(base, root_id)) == 1, "the first tick", server)
    wait_until(lambda: answers(base, root_id) == ["tick seen"], "the first tick's answer", server)

    shutdown(server)  # a plain restart: the schedules stay on disk
    again = start_server(base, servers, SCRIPT)
    assert open_root(again) == root_id

    wait_until(lambda: len(ticks(base, root_id)) == 2, "a tick after the restart", again)
    second = ticks(base, root_id)[1]
    assert second["text"].endswith("\ncheck the log") and second["mode"] == "follow_up"
    # The turn the tick started ends as the script answers (waited for: it may still run).
    wait_until(
        lambda: answers(base, root_id)[:2] == ["tick seen", "tick seen"], "its answer", again
    )


def answers(base: Path, session_id: str) -> list[str]:
    """The final text of each ended turn of a session, in order."""
    return [str(e["final_text"]) for e in entries(base, session_id) if e["type"] == "turn_end"]
