"""SIGTERM of a real `jupyter lab`: the running turn is recorded as stopped by the shutdown (not by
the user), every loaded agent's kernel is snapshotted on the way out, and after a restart the
variables come back, those set after the last turn too.

The model is tests/fake_llm_server.py behind the real OpenAI SDK, answering each message with one
cell; the user's own cell is run on the kernel with jupyter_client, as a notebook tab would.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from jupyter_client import BlockingKernelClient

from prime_agent_lab.core.wire import STOP_NOTICES

from .fake_llm_server import FakeLLMServer
from .lab_fixtures import (  # noqa: F401  (fixtures: a subprocess server, no in-process one)
    NO_KERNEL_POOL,
    jp_asyncio_loop,
    jp_server_cleanup,
    servers,
    start_server,
)
from .lab_process import LabServer
from .test_keys_withheld import cell_per_message, turns_ended
from .test_server_crash import (
    entries,
    wait_until,
)

HOLD = "import time\nx = 42\nopen('busy.flag', 'w').close()\nwhile True:\n    time.sleep(0.1)\n"
CELLS = {
    "hold": HOLD,
    "set": "x = 42\nprint('x set')",
    "check": "print('x', globals().get('x'), 'y', globals().get('y'))",
}
SHUTDOWN_NOTE = "[stopped] The server shut down and stopped the turn; this cell was interrupted."


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    with FakeLLMServer(cell_per_message(CELLS)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-shutdown")
        yield server


def start(base: Path, servers: list[LabServer]) -> LabServer:  # noqa: F811
    return start_server(
        base,
        servers,
        {"turns": []},
        extra_args=("--PrimeAgentLab.model=fake-model", *NO_KERNEL_POOL),
        provider="openai",
    )


def send(server: LabServer, session_id: str, text: str, turns: int) -> None:
    """Send `text` and wait until the session has `turns` turn ends."""
    server.api("POST", f"prime-agent/api/sessions/{session_id}/messages", {"text": text})
    wait_until(lambda: len(turns_ended(server.base, session_id)) >= turns, text, server)


def run_users_cell(server: LabServer, kernel_id: str, code: str) -> None:
    client = BlockingKernelClient(
        connection_file=str(server.base / "runtime" / f"kernel-{kernel_id}.json")
    )
    client.load_connection_file()
    client.start_channels()
    try:
        reply = client.execute_interactive(code, timeout=60)
    finally:
        client.stop_channels()
    assert reply["content"]["status"] == "ok"


def manifest(base: Path, session_id: str) -> Path:
    return base / "sessions" / session_id / "kernel-state" / "manifest.json"


def test_sigterm_records_the_shutdown_and_snapshots_every_loaded_agent_within_the_bound(
    tmp_path: Path,
    servers: list[LabServer],  # noqa: F811  (the fixture imported above)
    model: FakeLLMServer,
) -> None:
    base = tmp_path
    server = start(base, servers)
    root = server.root_dir
    for name in ("idle.ipynb", "busy.ipynb"):
        nbformat.write(nbformat.v4.new_notebook(), root / name)
    idle = server.api("POST", "prime-agent/api/sessions", {"notebook_path": "idle.ipynb"})
    send(server, idle["session_id"], "set", 1)
    wait_until(lambda: manifest(base, idle["session_id"]).exists(), "the after-turn snapshot")
    run_users_cell(server, idle["kernel_id"], "y = 7")  # after the last snapshot: only in memory
    busy = server.api("POST", "prime-agent/api/sessions", {"notebook_path": "busy.ipynb"})
    server.api("POST", f"prime-agent/api/sessions/{busy['session_id']}/messages", {"text": "hold"})
    wait_until(lambda: (root / "busy.flag").exists(), "the busy cell", server)

    sent = time.monotonic()
    os.kill(server.process.pid, signal.SIGTERM)
    server.process.wait(timeout=60)
    exited_after = time.monotonic() - sent

    log = server.log_path.read_text()
    assert turns_ended(base, busy["session_id"]) == [(1, "shutdown")], server.log_tail()
    [result] = [e for e in entries(base, busy["session_id"]) if e["type"] == "tool_result"]
    assert result["status"] == "interrupted"
    assert SHUTDOWN_NOTE in result["observation"] and "user stopped" not in result["observation"]
    assert manifest(base, busy["session_id"]).exists()  # its first snapshot: taken at shutdown
    summary = re.search(r"Prime Agent Lab shutdown: (.*) in ([0-9.]+) s", log)
    assert summary, log
    assert summary.group(1) == "1 running turn(s) stopped; 2 kernel snapshot(s) taken"
    print(f"shutdown part {summary.group(2)} s; SIGTERM to exit {exited_after:.2f} s")

    again = start(base, servers)
    for session, expected in ((busy, "x 42 y None"), (idle, "x 42 y 7")):
        attached = again.api(
            "POST", "prime-agent/api/sessions", {"notebook_path": session["notebook_path"]}
        )
        assert attached["session_id"] == session["session_id"]
        send(again, session["session_id"], "check", 2)
        final = entries(base, session["session_id"])[-1]
        assert (final["stop_reason"], final["final_text"]) == ("end_turn", expected), final
    chat = again.api("GET", f"prime-agent/api/sessions/{busy['session_id']}")["transcript"]
    stops = [i for i in chat if i["type"] == "notice" and i.get("stop_reason")]
    assert [(i["stop_reason"], i["text"]) for i in stops] == [
        ("shutdown", STOP_NOTICES["shutdown"])
    ]
