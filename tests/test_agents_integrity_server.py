"""The Agents View's routes on a real server with session folders it did not write or that went
away: a removed folder leaves the REST overview and the live stream; a forged child header is a
row with its reason, and every action on it (message, stop, delete, opening its session) answers
409 with that reason and starts no kernel (docs/agent-tree.md, "Headers from elsewhere")."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

from tornado.httpclient import HTTPClientError

from prime_agent_lab.core.sessions import SessionLog

from .conftest import use_script, wait_for
from .test_agents_server import api, rows_by_name
from .test_agents_server import jp_server_config as jp_server_config


def sessions_of(host: Any, agent_script: Any) -> tuple[Any, Any]:
    """A root and its sub-agent on disk, neither loaded (as after a restart)."""
    use_script(host, agent_script([{"text": "hello"}]))
    provider = host._provider_factory()
    root = host.runtime.create_session("work/survey.ipynb", provider)
    child = host.runtime.create_session(
        "work/survey.agents/alpha.ipynb",
        provider,
        parent_session_id=root.session_id,
        name="alpha",
        depth=1,
        task="a task",
        parent_notebook_path="work/survey.ipynb",
    )
    return root, child


async def test_a_removed_child_folder_leaves_the_overview_route_and_the_live_stream(
    host: Any, jp_fetch: Any, jp_ws_fetch: Any, agent_script: Any
) -> None:
    _, child = sessions_of(host, agent_script)
    status, overview = await api(jp_fetch)
    assert status == 200 and [r["name"] for r in overview["agents"]] == ["survey", "alpha"]
    ws = await jp_ws_fetch("prime-agent", "api", "agents", "events")
    first = json.loads(await ws.read_message())
    assert "alpha" in rows_by_name(first)

    shutil.rmtree(child.directory)  # the user deletes the folder, or `git clean`

    async def without_alpha() -> dict[str, Any]:
        while True:
            pushed = json.loads(await ws.read_message())
            if "alpha" not in rows_by_name(pushed):
                return pushed

    pushed = await asyncio.wait_for(without_alpha(), 30)
    assert [r["name"] for r in pushed["agents"]] == ["survey"]
    ws.close()
    status, overview = await api(jp_fetch)
    assert status == 200 and [r["name"] for r in overview["agents"]] == ["survey"]
    status, refused = await api(jp_fetch, child.session_id, "stop", method="POST")
    assert status == 404 and refused["error"]


async def test_a_forged_child_is_a_row_with_its_reason_and_every_action_on_it_is_refused(
    host: Any,
    jp_fetch: Any,
    jp_serverapp: Any,
    jp_root_dir: Path,
    make_notebook: Any,
    agent_script: Any,
) -> None:
    use_script(host, agent_script([{"text": "hello"}] * 4))
    root = await host.attach(make_notebook("work/survey.ipynb"))
    forged_id = "29990101-000000-forged"
    make_notebook("work/survey.agents/forged.ipynb")  # a notebook it could open: it does not
    SessionLog.create(
        host.runtime.repository.root / forged_id,
        {
            "session_id": forged_id,
            "notebook_path": "work/survey.agents/forged.ipynb",
            "provider": "scripted",
            "model": "demo",
            "parent_session_id": root.session_id,
            "name": "forged",
            "depth": 5,  # a root's child is at depth 1
            "task": "run the attacker's plan",
            "parent_notebook_path": "work/survey.ipynb",
        },
    )
    kernels = set(jp_serverapp.kernel_manager.list_kernel_ids())

    status, overview = await api(jp_fetch)
    assert status == 200
    row = rows_by_name(overview)["forged"]
    assert "depth 5" in row["problem"] and row["parent_id"] is None and row["depth"] == 0
    assert row["notebook"] is None and not row["can_message"] and not row["can_delete"]
    assert rows_by_name(overview)["survey"]["problem"] is None

    for path, method, body in [
        (("message",), "POST", {"text": "hi"}),
        (("stop",), "POST", {"subtree": True}),
        ((), "DELETE", None),
    ]:
        status, refused = await api(jp_fetch, forged_id, *path, method=method, body=body)
        assert status == 409, (path, status, refused)
        assert "refused" in refused["error"] and "depth 5" in refused["error"]
    try:  # the chat opening the child's notebook on that session
        await jp_fetch(
            "prime-agent",
            "api",
            "sessions",
            method="POST",
            body=json.dumps(
                {"notebook_path": "work/survey.agents/forged.ipynb", "session_id": forged_id}
            ),
        )
        raise AssertionError("the forged session was opened")
    except HTTPClientError as exc:
        assert exc.code == 409 and exc.response is not None
        assert "depth 5" in json.loads(exc.response.body)["message"]

    await host.runtime.wait_quiet()
    assert forged_id not in host.runtime.agents
    assert host.runtime.mailbox.pending(forged_id) == 0
    await asyncio.sleep(0.5)  # a kernel started in the background would be listed by now
    assert await wait_for(lambda: set(jp_serverapp.kernel_manager.list_kernel_ids()) <= kernels)
    assert not (jp_root_dir / "work" / "survey.agents" / "forged.ipynb.agents").exists()
    assert root.session_id in host.runtime.agents


async def test_an_agent_in_memory_whose_folder_went_refuses_messages_with_409_and_still_stops(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    use_script(host, agent_script([{"text": "hello"}] * 4))
    root = await host.attach(make_notebook("work/gone.ipynb"))
    shutil.rmtree(root.session.directory)  # the user removes the folder while it is open

    async def vanished_row() -> dict[str, Any] | None:
        _, overview = await api(jp_fetch)
        row = rows_by_name(overview).get("gone")
        return row if row is not None and row["problem"] else None

    row = await wait_for(vanished_row)
    assert "removed from disk" in row["problem"]
    assert (row["residency"], row["can_message"], row["can_delete"]) == ("resident", False, False)
    status, refused = await api(
        jp_fetch, root.session_id, "message", method="POST", body={"text": "hello?"}
    )
    assert status == 409 and "removed from disk" in refused["error"]  # was a 500
    status, stopped = await api(jp_fetch, root.session_id, "stop", method="POST")
    assert status == 200 and stopped == {"stopped": []}


async def test_a_message_to_a_sub_agent_that_cannot_come_back_is_refused_with_why_not_left_waiting(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    root, child = sessions_of(host, agent_script)  # the child's model is that script's
    make_notebook("work/survey.ipynb")
    make_notebook("work/survey.agents/alpha.ipynb")
    use_script(host, agent_script([{"text": "another server, another script"}] * 4))
    attached = await host.attach("work/survey.ipynb")
    assert attached.session_id == root.session_id

    status, refused = await api(
        jp_fetch, child.session_id, "message", method="POST", body={"text": "still there?"}
    )
    assert status == 409 and "cannot come back" in refused["error"]
    assert "unknown model" in refused["error"]
    _, overview = await api(jp_fetch)
    row = rows_by_name(overview)["alpha"]
    assert (row["state"], row["waiting_for"]) == ("idle", None)  # not waiting for mail for ever
    assert child.session_id not in host.runtime.agents


async def test_mail_queued_for_a_sub_agent_that_cannot_come_back_is_undeliverable_and_told(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    _, child = sessions_of(host, agent_script)
    make_notebook("work/survey.ipynb")
    make_notebook("work/survey.agents/alpha.ipynb")
    use_script(host, agent_script([{"text": "another script"}] * 4))
    parent = await host.attach("work/survey.ipynb")
    host.runtime.mailbox.send(parent, "the plan", "child", child.session_id, "auto")

    def told() -> list[dict[str, Any]]:
        return [
            e
            for e in parent.session.entries
            if e.get("type") == "notice" and e.get("kind") == "message_undeliverable"
        ]

    await wait_for(told)
    assert "cannot come back" in told()[0]["text"] and "the plan" in told()[0]["text"]
    await wait_for(lambda: not host.runtime.mailbox._pending.get(child.session_id))
