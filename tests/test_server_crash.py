"""Issue 8's crash acceptance: SIGKILL the Jupyter server in the middle of a run with a sub-agent
and queued messages, start it again, and find everything back.

The server is a real `jupyter lab` subprocess (`tests/lab_process.py`) on the scripted provider;
the test talks to it over REST and reads the sessions on disk, as a user's tools would. Agents
wait for files the test writes (events, not sleeps).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest

from .lab_fixtures import (  # noqa: F401  (fixtures: a subprocess server, no in-process one)
    jp_asyncio_loop,
    jp_server_cleanup,
    servers,
    start_server,
)
from .lab_process import LabServer

WAIT = 90.0

ROOT_SCRIPT: dict[str, Any] = {
    "turns": [
        # turn 1: a variable and a sub-agent that works until the test lets it go
        {
            "code": (
                "x = {'answer': 42}\n"
                "worker = await rlm('wait for go.flag', name='worker')\n"
                "print(worker.name)"
            )
        },
        {"text": "started"},
        # turn 2: two follow-ups queue behind the busy worker; then a cell that never ends
        {
            "code": (
                "import time\n"
                "r1 = await agent_message.send(\n"
                "    'one', receiver_role='child', receiver_name='worker', mode='follow_up'\n"
                ")\n"
                "r2 = await agent_message.send(\n"
                "    'two', receiver_role='child', receiver_name='worker', mode='follow_up'\n"
                ")\n"
                "print(r1.delivery_status, r2.delivery_status)\n"
                "open('sent.flag', 'w').close()\n"
                "while True:\n"
                "    time.sleep(0.2)"
            )
        },
        # turn 3, after the restart
        {
            "code": (
                "names = [s.name for s in await rlm.list_subagents()]\n"
                "print('x', x['answer'], 'children', names)"
            )
        },
        {"text": "{last_output_line}"},
    ],
    "child": {
        "turns": [
            {
                "code": (
                    "import os, time\n"
                    "open('worker.busy', 'w').close()\n"
                    "while not os.path.exists('go.flag'):\n"
                    "    time.sleep(0.1)"
                )
            },
            {"text": "done"},
            {"text": "got {messages}"},
            {"text": "got {messages}"},
        ]
    },
}


def wait_until(check: Callable[[], Any], what: str, server: LabServer | None = None) -> Any:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    log = f"\n--- server log ---\n{server.log_tail()}" if server else ""
    pytest.fail(f"timed out waiting for {what}{log}", pytrace=False)


def entries(base: Path, session_id: str) -> list[dict[str, Any]]:
    out = []
    for line in (base / "sessions" / session_id / "session.jsonl").read_text().splitlines()[1:]:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line torn by the kill
    return out


def child_session(base: Path, parent_id: str) -> str | None:
    for directory in (base / "sessions").iterdir():
        log = directory / "session.jsonl"
        if not log.is_file():
            continue
        header = json.loads(log.read_text().splitlines()[0])
        if header.get("parent_session_id") == parent_id:
            return directory.name
    return None


def turn_ends(base: Path, session_id: str) -> list[tuple[int, str]]:
    return [
        (e["turn"], e["stop_reason"]) for e in entries(base, session_id) if e["type"] == "turn_end"
    ]


def received(base: Path, session_id: str, text: str) -> int:
    """How many times `text` reached the agent as a message (a turn or inside a turn)."""
    return sum(
        1
        for e in entries(base, session_id)
        if e["type"] in ("user_message", "agent_message")
        and e.get("message_id")
        and e.get("text", "").rstrip().endswith(text)
    )


def test_a_server_killed_mid_run_comes_back_with_sessions_children_queue_and_variables(
    tmp_path: Path,
    servers: list[LabServer],  # noqa: F811  (the fixture imported above)
) -> None:
    base = tmp_path
    server = start_server(base, servers, ROOT_SCRIPT)
    root_dir = server.root_dir
    nbformat.write(nbformat.v4.new_notebook(), root_dir / "analysis.ipynb")
    root_id = server.api("POST", "prime-agent/api/sessions", {"notebook_path": "analysis.ipynb"})[
        "session_id"
    ]

    server.api("POST", f"prime-agent/api/sessions/{root_id}/messages", {"text": "start"})
    wait_until(lambda: turn_ends(base, root_id) == [(1, "end_turn")], "turn 1", server)
    wait_until(lambda: (root_dir / "worker.busy").exists(), "the worker to be busy", server)
    worker_id = child_session(base, root_id)
    assert worker_id is not None
    # The variables of turn 1 are snapshotted at its boundary.
    manifest = base / "sessions" / root_id / "kernel-state" / "manifest.json"
    wait_until(manifest.exists, "the root's kernel snapshot", server)

    server.api("POST", f"prime-agent/api/sessions/{root_id}/messages", {"text": "send"})
    wait_until(lambda: (root_dir / "sent.flag").exists(), "the two messages to be sent", server)
    mailbox = base / "sessions" / worker_id / "mailbox.jsonl"
    assert [json.loads(line)["type"] for line in mailbox.read_text().splitlines()] == [
        "queued",
        "queued",
    ]

    os.kill(server.process.pid, signal.SIGKILL)  # the server alone; its kernels notice and exit
    server.process.wait(timeout=30)
    (root_dir / "go.flag").touch()  # nothing is running to see it any more

    again = start_server(base, servers, ROOT_SCRIPT)
    # Opening the root notebook again brings the root back; its cut turn is marked, not replayed.
    reopened = again.api("POST", "prime-agent/api/sessions", {"notebook_path": "analysis.ipynb"})
    assert reopened["session_id"] == root_id
    assert turn_ends(base, root_id) == [(1, "end_turn"), (2, "interrupted")]

    # The queued messages reach the worker, each exactly once, without anyone opening it.
    wait_until(
        lambda: received(base, worker_id, "one") == 1 and received(base, worker_id, "two") == 1,
        "the queued messages to reach the worker",
        again,
    )
    # The first starts a turn and the second, a follow-up released with it, joins that turn.
    wait_until(
        lambda: turn_ends(base, worker_id) == [(1, "interrupted"), (2, "end_turn")],
        "the worker's turn for the messages",
        again,
    )
    assert received(base, worker_id, "one") == 1 and received(base, worker_id, "two") == 1

    # The root's variables came back, the model was told, and the registry is intact.
    again.api("POST", f"prime-agent/api/sessions/{root_id}/messages", {"text": "check"})
    wait_until(lambda: len(turn_ends(base, root_id)) == 3, "turn 3", again)
    final = entries(base, root_id)[-1]
    assert final["stop_reason"] == "end_turn", final
    assert final["final_text"] == "x 42 children ['worker']"
    restored = [e for e in entries(base, root_id) if e["type"] == "notice"]
    assert any("x" in str(e.get("text")) and "restored" in str(e.get("text")) for e in restored)

    # Both notebooks are still there and valid.
    nbformat.validate(nbformat.read(root_dir / "analysis.ipynb", as_version=4))
    [child_notebook] = (root_dir / "analysis.agents").glob("worker*.ipynb")
    nbformat.validate(nbformat.read(child_notebook, as_version=4))


NOTICE_SCRIPT: dict[str, Any] = {
    "turns": [
        {"code": "worker = await rlm('wait for go.flag', name='worker')"},
        {"text": "started"},
        # turn 2: the root is busy when its worker finishes, so the notice has to wait
        {"code": ("import time\nopen('busy.flag', 'w').close()\nwhile True:\n    time.sleep(0.2)")},
        # turn 3, after the restart: the notice
        {"text": "heard"},
    ],
    "child": {
        "turns": [
            {
                "code": (
                    "import os, time\nwhile not os.path.exists('go.flag'):\n    time.sleep(0.1)"
                )
            },
            {"text": "done"},
        ]
    },
}
NOTICE_END = "Its last answer: done"


def test_a_childs_completion_notice_waiting_for_its_busy_parent_survives_a_server_kill(
    tmp_path: Path,
    servers: list[LabServer],  # noqa: F811  (the fixture imported above)
) -> None:
    server = start_server(tmp_path, servers, NOTICE_SCRIPT)
    root_dir = server.root_dir
    nbformat.write(nbformat.v4.new_notebook(), root_dir / "analysis.ipynb")
    root_id = server.api("POST", "prime-agent/api/sessions", {"notebook_path": "analysis.ipynb"})[
        "session_id"
    ]
    server.api("POST", f"prime-agent/api/sessions/{root_id}/messages", {"text": "start"})
    wait_until(lambda: turn_ends(tmp_path, root_id) == [(1, "end_turn")], "turn 1", server)
    worker_id = wait_until(lambda: child_session(tmp_path, root_id), "the worker", server)

    server.api("POST", f"prime-agent/api/sessions/{root_id}/messages", {"text": "busy"})
    wait_until((root_dir / "busy.flag").exists, "the root's endless cell", server)
    (root_dir / "go.flag").touch()
    wait_until(lambda: turn_ends(tmp_path, worker_id) == [(1, "end_turn")], "the worker", server)
    mailbox = tmp_path / "sessions" / root_id / "mailbox.jsonl"
    wait_until(mailbox.exists, "the notice in the root's mailbox", server)
    assert received(tmp_path, root_id, NOTICE_END) == 0  # the root is still in its cell

    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=30)

    again = start_server(tmp_path, servers, NOTICE_SCRIPT)
    # A root comes back when its notebook is opened; the notice waiting on disk starts its turn.
    reopened = again.api("POST", "prime-agent/api/sessions", {"notebook_path": "analysis.ipynb"})
    assert reopened["session_id"] == root_id
    wait_until(
        lambda: received(tmp_path, root_id, NOTICE_END) == 1,
        "the worker's notice to reach the root after the restart",
        again,
    )
    wait_until(
        lambda: (
            turn_ends(tmp_path, root_id) == [(1, "end_turn"), (2, "interrupted"), (3, "end_turn")]
        ),
        "the root's turn for the notice",
        again,
    )
    [notice] = [
        e
        for e in entries(tmp_path, root_id)
        if e.get("text", "").endswith(NOTICE_END) and e["type"] == "user_message"
    ]
    assert notice["notice"] == "child_completed" and notice["from_session_id"] == worker_id
