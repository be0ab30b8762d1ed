"""`prime-agent-lab agents` and `prime-agent-lab send` against a real `jupyter lab` subprocess,
found through its runtime file as `jupyter server list` finds it (prime_agent_lab/agents_cli.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from prime_agent_lab.agents_cli import AgentsCommandError, Server, find_server, resolve_agent
from prime_agent_lab.core.sessions import SESSION_FILE

from .lab_fixtures import jp_asyncio_loop, jp_server_cleanup, servers, start_server  # noqa: F401
from .lab_process import REPO, LabServer

SCRIPT = {
    "turns": [
        {"code": 'await rlm("say hello", name="alpha")'},
        {"text": "spawned"},
        *[{"text": "noted: {messages}"}] * 4,
    ],
    "child": {"turns": [{"text": "hello from alpha"}, {"text": "got: {messages}"}] * 3},
}


def cli(server: LabServer, *words: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(server.base / "runtime"),
        "PYTHONPATH": os.pathsep.join((str(REPO), str(REPO / "kernel_ext"))),
    }
    return subprocess.run(
        [sys.executable, "-m", "prime_agent_lab.cli", *words],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def wait_until(predicate: Any, what: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s")


def session_text(server: LabServer, session_id: str) -> str:
    return (server.base / "sessions" / session_id / SESSION_FILE).read_text()


def test_agents_prints_the_tree_and_send_messages_a_child_by_name(
    tmp_path: Path,
    servers: list[LabServer],  # noqa: F811
) -> None:
    server = start_server(tmp_path / "lab", servers, SCRIPT)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(notebook, server.root_dir / "survey.ipynb")
    root = server.api("POST", "prime-agent/api/sessions", {"notebook_path": "survey.ipynb"})
    server.api("POST", f"prime-agent/api/sessions/{root['session_id']}/messages", {"text": "go"})

    def alpha_done() -> Any:
        rows = server.api("GET", "prime-agent/api/agents")["agents"]
        return [r for r in rows if r["name"] == "alpha" and r["outcome"] == "completed"]

    (alpha,) = wait_until(alpha_done, "alpha completes its task")

    shown = cli(server, "agents")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAME", "STATE", "OUTCOME"]
    assert lines[1].startswith("survey ") and lines[2].startswith("  alpha ")
    assert "completed" in lines[2] and "resident" in lines[2]
    assert "scripted · script.json" in lines[2]  # a script is named by its file

    as_json = cli(server, "agents", "--json", "--state", "idle")
    assert as_json.returncode == 0, as_json.stderr
    overview = json.loads(as_json.stdout)
    assert alpha["session_id"] in [r["session_id"] for r in overview["agents"]]

    sent = cli(server, "send", "alpha", "please say more")
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout == f"sent to alpha ({alpha['session_id']}) as a message from its root\n"
    wait_until(lambda: "please say more" in session_text(server, alpha["session_id"]), "mail")

    by_prefix = cli(server, "send", root["session_id"][:18], "and you?")
    assert by_prefix.returncode == 0 and "as a chat message" in by_prefix.stdout, by_prefix

    unknown = cli(server, "send", "nobody", "hi")
    assert unknown.returncode == 1 and "no agent 'nobody'" in unknown.stderr
    empty = cli(server, "send", "alpha", "  ")
    assert empty.returncode == 1 and "answered 400: text is required" in empty.stderr
    elsewhere = cli(server, "agents", "--server", "http://127.0.0.1:9/")
    assert elsewhere.returncode == 1
    assert f"no running Jupyter server at http://127.0.0.1:9/; running: {server.url}" in (
        elsewhere.stderr
    )


def test_several_servers_need_server_and_none_is_said_plainly() -> None:
    one, two = Server("http://localhost:8888/", "a"), Server("http://127.0.0.1:8890/lab/", "b")
    with pytest.raises(AgentsCommandError, match="several Jupyter servers run: pick one"):
        find_server(None, [one, two])
    assert find_server("http://127.0.0.1:8888", [one, two]) is one
    assert find_server("http://localhost:8890/lab", [one, two]) is two
    with pytest.raises(AgentsCommandError, match="no running Jupyter server found"):
        find_server(None, [])


def test_an_agent_is_named_by_id_unique_prefix_or_unique_name() -> None:
    rows: list[Any] = [
        {"session_id": "20260101-000000-aaaaaa", "name": "survey"},
        {"session_id": "20260101-000000-aaabbb", "name": "alpha"},
        {"session_id": "20260101-000001-cccccc", "name": "alpha"},
    ]
    assert resolve_agent(rows, "survey")["session_id"].endswith("aaaaaa")
    assert resolve_agent(rows, "20260101-000001")["session_id"].endswith("cccccc")
    with pytest.raises(AgentsCommandError, match="names several agents"):
        resolve_agent(rows, "20260101-000000-aaa")
    with pytest.raises(AgentsCommandError, match="names several agents"):
        resolve_agent(rows, "alpha")
