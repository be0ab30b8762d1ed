"""The Agents View's routes on a real server with scripted agents: the overview, its websocket,
messaging (reach rules), stop and delete (jupyter/handlers_agents.py, docs/agents-view.md)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from .conftest import run_turn, use_script, wait_for

# A sub-agent's task is "<kind> <flag>": it waits in a cell until the flag file exists; "spawn"
# first starts a sub-agent of its own, "leaf", waiting on the flag "<flag>-leaf".
CHILD_CELL = (
    "import os, time\n"
    'kind, flag = "{task}".split(" ", 1)\n'
    'if kind == "spawn":\n'
    '    await rlm("wait " + flag + "-leaf", name="leaf")\n'
    "deadline = time.time() + 120\n"
    "while not os.path.exists(flag) and time.time() < deadline:\n"
    "    time.sleep(0.05)\n"
    "print('released')"
)
CHILD = {"turns": [{"code": CHILD_CELL}, {"text": "done"}, {"text": "got: {messages}"}]}
NOTED = [{"text": "noted: {messages}"}] * 6


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any]) -> dict[str, Any]:
    """A server with a token, as a user's is (the suite's servers run without one)."""
    return {**jp_server_config, "IdentityProvider": {"token": "agents-view-token"}}


def tree_script(tmp_path: Path, spawns: list[tuple[str, str]]) -> str:
    code = "\n".join(f"await rlm({task!r}, name={name!r})" for name, task in spawns)
    turns = [{"code": code}, {"text": "spawned"}, *NOTED]
    path = tmp_path / "agents-view.json"
    path.write_text(json.dumps({"turns": turns, "child": CHILD}), encoding="utf-8")
    return str(path)


async def api(
    jp_fetch: Any, *path: str, method: str = "GET", body: Any = None, **params: str
) -> Any:
    """(status, JSON body or None) of an Agents View route; errors are answers too."""
    options: dict[str, Any] = {"method": method, "params": params}
    if body is not None:
        options["body"] = json.dumps(body)
    elif method == "POST":
        options["body"] = "{}"
    try:
        response = await jp_fetch("prime-agent", "api", "agents", *path, **options)
    except HTTPClientError as exc:
        assert exc.response is not None
        return exc.code, json.loads(exc.response.body)
    return response.code, json.loads(response.body) if response.body else None


def rows_by_name(overview: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in overview["agents"]}


async def start_tree(
    host: Any, make_notebook: Any, tmp_path: Path, spawns: list[tuple[str, str]]
) -> Any:
    use_script(host, tree_script(tmp_path, spawns))
    root = await host.attach(make_notebook("work/survey.ipynb"))
    ended = await run_turn(host, root.session_id, "fan out")
    assert ended["final_text"] == "spawned", ended
    return root


async def test_the_overview_lists_the_tree_pushes_a_childs_finish_and_messages_and_deletes(
    host: Any, jp_fetch: Any, jp_ws_fetch: Any, make_notebook: Any, tmp_path: Path
) -> None:
    alpha_flag, beta_flag = tmp_path / "alpha.flag", tmp_path / "beta.flag"
    spawns = [("alpha", f"wait {alpha_flag}"), ("beta", f"wait {beta_flag}")]
    root = await start_tree(host, make_notebook, tmp_path, spawns)
    await wait_for(lambda: sum(a.running for a in host.agents.values()) == 2)

    status, overview = await api(jp_fetch)
    assert status == 200
    assert [(r["name"], r["depth"]) for r in overview["agents"]] == [
        ("survey", 0),
        ("alpha", 1),
        ("beta", 1),
    ]
    rows = rows_by_name(overview)
    assert rows["survey"]["state"] == "waiting" and rows["survey"]["waiting_for"] == "child"
    assert rows["survey"]["outcome"] == "completed" and rows["survey"]["notebook"] == (
        "work/survey.ipynb"
    )
    assert rows["alpha"]["state"] == "running" and rows["alpha"]["residency"] == "resident"
    assert rows["alpha"]["parent_id"] == root.session_id == rows["beta"]["root_id"]
    assert rows["alpha"]["model"] == "scripted · agents-view.json"  # a script is named by its file
    assert not rows["alpha"]["can_delete"] and rows["alpha"]["can_message"]

    ws = await jp_ws_fetch("prime-agent", "api", "agents", "events")
    first = json.loads(await ws.read_message())
    assert rows_by_name(first)["alpha"]["state"] == "running"
    alpha_flag.touch()

    async def alpha_finished() -> dict[str, Any]:
        while True:
            row = rows_by_name(json.loads(await ws.read_message()))["alpha"]
            if row["state"] == "idle":
                return row

    finished = await asyncio.wait_for(alpha_finished(), 60)
    assert finished["outcome"] == "completed" and finished["can_delete"]
    assert finished["tokens_own"]["input"] > 0
    ws.close()

    status, running = await api(jp_fetch, state="running")
    assert status == 200 and [r["name"] for r in running["agents"]] == ["beta"]
    status, refused = await api(jp_fetch, state="asleep")
    assert status == 400 and "running, idle, waiting" in refused["error"]

    alpha_id = rows["alpha"]["session_id"]
    status, sent = await api(jp_fetch, alpha_id, "message", method="POST", body={"text": "hi"})
    assert (status, sent) == (202, {"delivered": "mail"})

    def mail_from_root() -> list[dict[str, Any]]:
        alpha = host.agents.get(alpha_id)
        entries = alpha.session.path() if alpha is not None else []
        return [
            e for e in entries if e.get("from_session_id") == root.session_id and "hi" in e["text"]
        ]

    (mail,) = await wait_for(mail_from_root, timeout=60)
    assert mail["relationship"] == "parent"

    beta_id = rows["beta"]["session_id"]
    status, refused = await api(jp_fetch, beta_id, method="DELETE")
    assert status == 409 and "running" in refused["error"]
    status, stopped = await api(jp_fetch, beta_id, "stop", method="POST", body={"subtree": False})
    assert (status, stopped) == (200, {"stopped": [beta_id]})
    status, _ = await api(jp_fetch, beta_id, method="DELETE")
    assert status == 204
    status, after = await api(jp_fetch)
    assert [r["name"] for r in after["agents"]] == ["survey", "alpha"]

    status, refused = await api(jp_fetch, root.session_id, method="DELETE")
    assert status == 400 and "session list" in refused["error"]
    status, refused = await api(jp_fetch, "20990101-000000-abcdef", "stop", method="POST")
    assert status == 404 and refused["error"]
    status, refused = await api(jp_fetch, alpha_id, "message", method="POST", body={"text": " "})
    assert status == 400
    too_long = "x" * (host.runtime.settings.max_message_chars + 1)
    status, refused = await api(
        jp_fetch, alpha_id, "message", method="POST", body={"text": too_long}
    )
    assert status == 400 and "limit" in refused["error"]
    status, sent = await api(
        jp_fetch, root.session_id, "message", method="POST", body={"text": "go"}
    )
    assert (status, sent) == (202, {"delivered": "chat"})


async def test_a_grandchild_is_out_of_reach_and_stop_subtree_stops_the_branch(
    host: Any, jp_fetch: Any, make_notebook: Any, tmp_path: Path
) -> None:
    host.runtime.settings = dataclasses.replace(host.runtime.settings, max_depth=2)
    mid_flag = tmp_path / "mid.flag"
    root = await start_tree(host, make_notebook, tmp_path, [("mid", f"spawn {mid_flag}")])
    await wait_for(lambda: sum(a.running for a in host.agents.values()) == 2, timeout=60)

    _, overview = await api(jp_fetch)
    rows = rows_by_name(overview)
    assert [(r["name"], r["depth"]) for r in overview["agents"]] == [
        ("survey", 0),
        ("mid", 1),
        ("leaf", 2),
    ]
    assert rows["mid"]["state"] == "waiting" and rows["mid"]["waiting_for"] == "child"
    assert not rows["leaf"]["can_message"]
    leaf_id, mid_id = rows["leaf"]["session_id"], rows["mid"]["session_id"]

    status, refused = await api(jp_fetch, leaf_id, "message", method="POST", body={"text": "hi"})
    assert status == 403 and "only its parent 'mid'" in refused["error"]
    assert host.runtime.mailbox.pending(leaf_id) == 0

    status, stopped = await api(jp_fetch, mid_id, "stop", method="POST", body={"subtree": True})
    assert status == 200 and sorted(stopped["stopped"]) == sorted([mid_id, leaf_id])
    await wait_for(lambda: not any(a.running for a in host.agents.values()))
    _, after = await api(jp_fetch)
    outcomes = {r["name"]: r["outcome"] for r in after["agents"]}
    assert outcomes["mid"] == "stopped" and outcomes["leaf"] == "stopped"
    # The leaf's stop is news for mid only in its chat: one Stop took both.
    mid = host.agents[mid_id]
    told = [e for e in mid.session.path() if e.get("notice") == "child_stopped"]
    assert told == [] and host.runtime.mailbox.pending(mid_id) == 0
    assert root.session_id == rows["leaf"]["root_id"]


async def test_the_agents_routes_need_a_login(
    host: Any, http_server_client: Any, jp_base_url: str
) -> None:
    base = f"{jp_base_url.rstrip('/')}/prime-agent/api/agents"
    for url, method, body in ((base, "GET", None), (f"{base}/x1/stop", "POST", "{}")):
        response = await http_server_client.fetch(url, method=method, body=body, raise_error=False)
        assert response.code == 403, (url, response.code)
    token = {"Authorization": "token agents-view-token"}
    response = await http_server_client.fetch(base, headers=token, raise_error=False)
    assert response.code == 200
    events = await http_server_client.fetch(f"{base}/events", raise_error=False)
    assert events.code == 403
