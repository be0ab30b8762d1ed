"""Prime Agent Lab on a real JupyterHub (issue 20, docs/jupyterhub.md): `SimpleLocalProcessSpawner`,
the dummy authenticator and configurable-http-proxy, two users, alice and bob, each with their
own single-user server running the extension on the scripted provider.

- Each user's agent attaches to a notebook in their own home and runs a cell there; the cell
  reaches its server over the bridge (`await rlm.usage()`) and does not see the provider key
  the Hub gives the servers (`c.Spawner.environment`).
- The administrator's locks (the image's config, `$VENV/etc/jupyter`, written by
  `.ci/hub-setup`) hold against alice's own config.
- Code of a user's own that their server runs as it starts (a Python config file, a .pth file)
  reads the key (alice); `disable_user_config` and `PYTHONNOUSERSITE=1` keep it out (bob).
- bob's token is refused on alice's `prime-agent` routes and on her events websocket, and her
  bridge refuses an unsigned call, a forged one and one for a kernel that is not hers.

Set-up: `bash .ci/hub-setup` (skipped with that reason without it). It takes about a minute
here, most of it the two servers starting:
`python -m pytest tests/test_jupyterhub.py -m hub` (measured runs: docs/gateway.md part 4).
"""

from __future__ import annotations

import json
import secrets
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websocket

from prime_agent_lab.core.bridge import sign

from . import hub_process
from .hub_process import Hub
from .lab_process import REPO, write_json

MISSING = hub_process.missing_tools()
pytestmark = [
    pytest.mark.hub,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        hub_process.missing_tools() is not None, reason=str(hub_process.missing_tools())
    ),
]

USERS = ("alice", "bob")
OTHER = {"alice": "bob", "bob": "alice"}
KEY = "ANTHROPIC_API_KEY"
CELL = f"""import os
usage = await rlm.usage()
print(6 * 7, os.environ.get({KEY!r}), type(usage).__name__)"""
LOCKED = ["provider", "model", "subagent_models", "max_permission", "autonomous_max_tokens"]
TURN_TIMEOUT = 240.0
LEAK_BY_CONFIG = f"""import os
open(os.path.expanduser("~/leak-config.txt"), "w").write(os.environ.get({KEY!r}, ""))
"""
LEAK_BY_PTH = (
    f"import os; k = os.environ.get({KEY!r}); "
    "k and open(os.path.expanduser('~/leak-pth.txt'), 'a').write(k)\n"
)
HARDEN_BOB = """
def harden(spawner):  # docs/jupyterhub.md: keep the user's own code out of their server
    if spawner.user.name == "bob":
        spawner.disable_user_config = True
        spawner.environment = {**spawner.environment, "PYTHONNOUSERSITE": "1"}

c.Spawner.pre_spawn_hook = harden
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """The Hub with both users' servers ready and a token per user; every process stopped at
    the end."""
    base = tmp_path_factory.mktemp("hub")
    script = base / "script.json"
    write_json(script, {"turns": [{"code": CELL}, {"text": "{last_output_line}"}]})
    for user in USERS:  # code of the user's own, run as their server starts (if let)
        home = base / "home" / user
        (home / ".jupyter").mkdir(parents=True)
        (home / ".jupyter" / "jupyter_server_config.py").write_text(LEAK_BY_CONFIG)
        site = home / ".local" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
        (site / "site-packages").mkdir(parents=True)
        (site / "site-packages" / "leak.pth").write_text(LEAK_BY_PTH)
    write_json(  # alice's own config tries to change what the administrator locked
        base / "home" / "alice" / ".jupyter" / "jupyter_server_config.json",
        {"PrimeAgentLab": {"provider": "openai", "autonomous_max_tokens": 10_000_000}},
    )
    environment = {
        "PYTHONPATH": f"{REPO}:{REPO / 'kernel_ext'}",
        # The user's config folder ranks above the image's (as in a conda-based image), so
        # only the lock keeps alice's values out; in a venv jupyter ranks the image's first.
        "JUPYTER_PREFER_ENV_PATH": "0",
        KEY: f"sk-ant-hubtest-{secrets.token_hex(12)}",
    }
    started = time.monotonic()
    args = [f"--PrimeAgentLab.script_path={script}"]
    running = hub_process.start(base, USERS, environment, args, HARDEN_BOB)
    running.timings["hub and proxy answering"] = time.monotonic() - started
    try:
        ready = hub_process.spawn(running, USERS)
        running.timings.update({f"{user}'s server ready": s for user, s in ready.items()})
        yield running
    finally:
        hub_process.stop(running)
        running.timings["whole module"] = time.monotonic() - started
        print(f"\nhub test timings (s): {json.dumps(running.timings)}")


def _user(user: str, path: str) -> str:
    return f"user/{user}/{path.lstrip('/')}"


@pytest.fixture(scope="module")
def sessions(hub: Hub) -> dict[str, dict[str, Any]]:
    """Each user's agent, attached to `analysis.ipynb` in their home, after one turn: its
    session (as GET answers it) and its final answer."""
    empty = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    attached: dict[str, dict[str, Any]] = {}
    for user in USERS:
        token = hub.tokens[user]
        notebook = {"type": "notebook", "format": "json", "content": empty}
        status, answer = hub.call(
            _user(user, "api/contents/analysis.ipynb"), token, "PUT", notebook
        )
        assert status in (200, 201), (status, answer)
        started = time.monotonic()
        route = _user(user, "prime-agent/api/sessions")
        status, answer = hub.call(route, token, "POST", {"notebook_path": "analysis.ipynb"})
        assert status == 200, (status, answer)
        hub.timings[f"{user}'s attach"] = time.monotonic() - started
        attached[user] = answer
        route = _user(user, f"prime-agent/api/sessions/{answer['session_id']}/messages")
        status, answer = hub.call(route, token, "POST", {"text": "go"})
        assert status in (200, 202), (status, answer)
    for user in USERS:
        session_id = attached[user]["session_id"]
        route = _user(user, f"prime-agent/api/sessions/{session_id}")

        def turn_done(user: str = user, route: str = route) -> Any:
            status, info = hub.call(route, hub.tokens[user])
            done = status == 200 and info.get("turns", 0) >= 1 and info.get("status") == "idle"
            return info if done else None

        attached[user] = hub_process.wait_until(turn_done, TURN_TIMEOUT, f"{user}'s turn", hub)
        log = hub.base / "home" / user / ".prime-agent" / "sessions" / session_id / "session.jsonl"
        entries = [json.loads(line) for line in log.read_text().splitlines()]
        attached[user]["answers"] = [
            e["final_text"] for e in entries if e.get("type") == "turn_end"
        ]
    return attached


def test_each_users_agent_runs_its_cell_in_their_own_notebook_without_the_key(
    hub: Hub, sessions: dict[str, dict[str, Any]]
) -> None:
    for user in USERS:
        assert sessions[user]["answers"] == ["42 None AgentUsage"], sessions[user]
        notebook = hub.base / "home" / user / "analysis.ipynb"

        def saved_output(notebook: Path = notebook) -> bool:  # the room saves after a debounce
            cells = json.loads(notebook.read_text())["cells"]
            texts = ["".join(o.get("text", "")) for c in cells for o in c.get("outputs", [])]
            return "42 None AgentUsage\n" in texts

        hub_process.wait_until(saved_output, 60, f"{user}'s notebook saved with the output", hub)
    assert hub.environment[KEY] not in hub.log()


def test_the_administrators_locks_hold_against_a_users_own_config(
    hub: Hub, sessions: dict[str, dict[str, Any]]
) -> None:
    status, info = hub.call(_user("alice", "prime-agent/api/info"), hub.tokens["alice"])
    assert status == 200, info
    assert info["provider"] == "scripted"
    assert info["locked_settings"] == LOCKED
    log = hub.log()
    for name, locked, wanted in (
        ("provider", "'scripted'", "'openai'"),
        ("autonomous_max_tokens", "20000", "10000000"),
    ):
        assert (
            f"c.PrimeAgentLab.{name} is locked by the administrator to {locked} "
            f"({hub_process.IMAGE_CONFIG}); the value {wanted} given by your config or the "
            "command line is not used"
        ) in log
    route = f"prime-agent/api/sessions/{sessions['alice']['session_id']}/autonomy"
    budgets = {"enabled": True, "budgets": {"max_tokens": 20_001}}
    status, answer = hub.call(_user("alice", route), hub.tokens["alice"], "PUT", budgets)
    assert status == 403, answer
    assert "locked by the administrator" in answer["message"]


def test_code_of_the_users_own_reads_the_key_at_start_unless_the_hub_keeps_it_out(
    hub: Hub,
) -> None:
    """Kernels never get the key, but a user's server holds it, and runs a Python config file
    in ~/.jupyter and .pth files in the user's site-packages as it starts (alice). The Hub's
    `disable_user_config` and `PYTHONNOUSERSITE=1` keep both out (bob)."""
    key, homes = hub.environment[KEY], hub.base / "home"
    assert (homes / "alice" / "leak-config.txt").read_text() == key
    assert key in (homes / "alice" / "leak-pth.txt").read_text()
    assert not (homes / "bob" / "leak-config.txt").exists()
    assert not (homes / "bob" / "leak-pth.txt").exists()


def test_a_users_token_is_refused_on_the_others_routes(
    hub: Hub, sessions: dict[str, dict[str, Any]]
) -> None:
    for owner, intruder in OTHER.items():
        session_id = sessions[owner]["session_id"]
        token = hub.tokens[intruder]
        for method, path, body in (
            ("GET", "prime-agent/api/info", None),
            ("GET", "prime-agent/api/sessions", None),
            ("GET", f"prime-agent/api/sessions/{session_id}", None),
            ("POST", f"prime-agent/api/sessions/{session_id}/messages", {"text": "hijack"}),
            ("PUT", f"prime-agent/api/sessions/{session_id}/permission", {"mode": "plan"}),
            ("POST", f"prime-agent/api/sessions/{session_id}/stop", {}),
        ):
            status, _ = hub.call(_user(owner, path), token, method, body)
            assert status in (403, 404), (owner, intruder, method, path, status)
        own = hub.call(_user(owner, f"prime-agent/api/sessions/{session_id}"), hub.tokens[owner])
        assert own[0] == 200
        assert own[1]["turns"] == 1  # the intruder's message never started a turn


def _events(hub: Hub, owner: str, session_id: str, token: str) -> websocket.WebSocket:
    url = hub.url.replace("http://", "ws://") + _user(
        owner, f"prime-agent/api/sessions/{session_id}/events"
    )
    return websocket.create_connection(
        url, header=[f"Authorization: token {token}"], timeout=60, suppress_origin=True
    )


def test_a_users_token_is_refused_on_the_others_events_websocket(
    hub: Hub, sessions: dict[str, dict[str, Any]]
) -> None:
    for owner, intruder in OTHER.items():
        session_id = sessions[owner]["session_id"]
        with pytest.raises(websocket.WebSocketBadStatusException) as refused:
            _events(hub, owner, session_id, hub.tokens[intruder])
        assert refused.value.status_code in (403, 404)
        own = _events(hub, owner, session_id, hub.tokens[owner])
        try:
            assert json.loads(own.recv())["type"]  # the owner's stream replays its events
        finally:
            own.close()


def test_the_bridge_refuses_unsigned_forged_and_foreign_calls(
    hub: Hub, sessions: dict[str, dict[str, Any]]
) -> None:
    """The bridge needs no login (kernels call it); a signature with a key only alice's server
    and her kernel hold is what lets a call in, whoever's Hub token comes with it."""
    alice, bob = sessions["alice"]["kernel_id"], sessions["bob"]["kernel_id"]
    assert alice and bob

    def call(kernel_id: str, signature: str | None, token: str = "") -> tuple[int, Any]:
        body = json.dumps(
            {"kernel_id": kernel_id, "ts": time.time(), "nonce": uuid.uuid4().hex, "op": "usage"}
        ).encode()
        headers = {} if signature is None else {"X-Prime-Agent-Signature": signature(body)}
        route = _user("alice", f"prime-agent/bridge/kernels/{kernel_id}/call")
        return hub.call(route, token, "POST", body, **headers)

    forged_key = secrets.token_bytes(32)
    forged = lambda body: sign(forged_key, body)  # noqa: E731
    assert call(alice, None) == (403, {"status": "error", "error": "bad signature"})
    assert call(alice, forged) == (403, {"status": "error", "error": "bad signature"})
    assert call(alice, forged, hub.tokens["bob"]) == (
        403,
        {"status": "error", "error": "bad signature"},
    )
    assert call(bob, forged, hub.tokens["bob"]) == (
        403,
        {"status": "error", "error": "unknown kernel"},
    )
