"""Deleting a session (`DELETE .../sessions/<id>`) against what loads sessions behind the user's
back: a message or a heartbeat tick brings an inactive sub-agent back (core/mailbox.py,
`AgentRuntime.ensure_loaded`). Each interleaving is forced with hooks, never with sleeps, on a
real server with real kernels (docs/pairing.md, section 1)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.sessions import SESSION_FILE
from prime_agent_lab.jupyter.host_errors import HostError
from prime_agent_lab.providers import make_provider

from .conftest import use_script, wait_for

IDLE_SCRIPT = [{"text": "noted"}]


async def parent_and_kid(host: Any, make_notebook: Any, agent_script: Any) -> tuple[Agent, str]:
    """A root agent attached to `a.ipynb` and its sub-agent `kid`, on disk and not loaded."""
    script = agent_script(IDLE_SCRIPT)
    use_script(host, script)
    parent: Agent = await host.attach(make_notebook("a.ipynb"))
    kid_notebook = make_notebook("a.agents/kid.ipynb")
    kid = host.runtime.create_session(
        kid_notebook,
        make_provider("scripted", None, script_path=script),
        parent_session_id=parent.session_id,
        name="kid",
        depth=1,
        parent_notebook_path="a.ipynb",
    )
    assert kid.session_id not in host.agents
    return parent, kid.session_id


def waits_on(lock: asyncio.Lock) -> bool:
    """Whether a task is queued for `lock` (asyncio keeps its waiters in `_waiters`)."""
    return bool(getattr(lock, "_waiters", None))


async def test_a_delete_that_comes_while_a_message_loads_the_sub_agent_waits_and_is_refused(
    host: Any, make_notebook: Any, agent_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent, kid_id = await parent_and_kid(host, make_notebook, agent_script)
    environment = host.runtime.environment
    open_notebook = environment.open_notebook
    reached, go = asyncio.Event(), asyncio.Event()

    async def held_open(path: str) -> Any:  # the load stops here until the test lets it go
        reached.set()
        await go.wait()
        return await open_notebook(path)

    monkeypatch.setattr(environment, "open_notebook", held_open)
    host.runtime.mailbox.send(parent, "are you there?", "child", "kid")
    await reached.wait()

    deleting = asyncio.ensure_future(host.delete_session(kid_id))
    await wait_for(lambda: deleting.done() or waits_on(host.runtime.loading_lock(kid_id)))
    go.set()

    with pytest.raises(HostError) as refused:
        await deleting
    assert refused.value.status == 409 and kid_id in refused.value.message
    await wait_for(lambda: kid_id in host.agents)
    assert (host.repository.directory(kid_id) / SESSION_FILE).is_file()


async def test_a_message_that_comes_while_a_delete_runs_does_not_load_the_session_it_removes(
    host: Any, make_notebook: Any, agent_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent, kid_id = await parent_and_kid(host, make_notebook, agent_script)
    repository = host.repository
    remove = repository.delete
    loop = asyncio.get_running_loop()
    removing, go = asyncio.Event(), threading.Event()

    def held_delete(session_id: str) -> None:  # runs in a thread: stops before removing
        loop.call_soon_threadsafe(removing.set)
        go.wait(timeout=60)
        remove(session_id)

    monkeypatch.setattr(repository, "delete", held_delete)
    deleting = asyncio.ensure_future(host.delete_session(kid_id))
    await removing.wait()

    host.runtime.mailbox.send(parent, "are you there?", "child", "kid")
    lock = host.runtime.loading_lock(kid_id)
    await wait_for(lambda: kid_id in host.agents or waits_on(lock))
    go.set()
    await deleting

    await wait_for(lambda: not lock.locked() and not waits_on(lock))
    assert kid_id not in host.agents
    assert not repository.directory(kid_id).exists()
    told = [e for e in parent.session.entries if e.get("kind") == "message_undeliverable"]
    assert len(told) == 1 and "it was deleted" in told[0]["text"]  # not queued for ever
    assert host.runtime.mailbox.pending(kid_id) == 0


async def delete(jp_fetch: Any, session_id: str) -> tuple[int, Any]:
    response = await jp_fetch(
        "prime-agent", "api", "sessions", session_id, method="DELETE", raise_error=False
    )
    return response.code, json.loads(response.body)


async def test_deleting_a_session_deletes_its_sub_agents_sessions_and_keeps_their_notebooks(
    jp_fetch: Any, host: Any, make_notebook: Any
) -> None:
    repository = host.repository
    model = {"provider": "scripted", "model": "demo"}
    root = repository.create(notebook_path="a.ipynb", **model)
    kid = repository.create(
        notebook_path="a.agents/kid.ipynb",
        parent_session_id=root.session_id,
        name="kid",
        depth=1,
        **model,
    )
    grandkid = repository.create(
        notebook_path="a.agents/kid.agents/g.ipynb",
        parent_session_id=kid.session_id,
        name="g",
        depth=2,
        **model,
    )
    taken_out = repository.create(  # `rlm.delete_subagent` keeps its folder: still the root's
        notebook_path="a.agents/old.ipynb",
        parent_session_id=root.session_id,
        name="old",
        depth=1,
        **model,
    )
    host.runtime.family.mark_deleted(taken_out.session_id, taken_out.directory)
    other = repository.create(notebook_path="a.ipynb", **model)  # another root of the notebook
    kid_notebook = Path(make_notebook("a.agents/kid.ipynb"))

    code, done = await delete(jp_fetch, root.session_id)

    assert code == 200, done
    below = [kid.session_id, grandkid.session_id, taken_out.session_id]
    assert done["deleted"] == root.session_id and sorted(done["sub_agents"]) == sorted(below)
    for session in (root, kid, grandkid, taken_out):
        assert not session.directory.exists()
        assert host.runtime.family.member(session.session_id) is None
    assert other.directory.is_dir()
    assert (host.serverapp.root_dir / kid_notebook).is_file()  # a notebook is the user's file


async def test_a_delete_is_refused_naming_a_loaded_sub_agent_and_removes_nothing(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    parent, kid_id = await parent_and_kid(host, make_notebook, agent_script)
    await host.attach("a.ipynb", new=True)  # the parent is detached, its sub-agent not
    await host.runtime.ensure_loaded(kid_id)

    code, refused = await delete(jp_fetch, parent.session_id)

    assert code == 409 and kid_id in refused["message"] and "kid" in refused["message"]
    assert parent.session.directory.is_dir()
    assert host.repository.directory(kid_id).is_dir()


async def test_opening_a_sub_agents_notebook_while_a_message_brings_it_back_loads_it_once(
    host: Any, make_notebook: Any, agent_script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent, kid_id = await parent_and_kid(host, make_notebook, agent_script)
    runtime = host.runtime
    environment = runtime.environment
    open_notebook, ensure_loaded = environment.open_notebook, runtime.ensure_loaded
    reached, go, loaded = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def held_open(path: str) -> Any:  # the message's load stops here
        reached.set()
        await go.wait()
        return await open_notebook(path)

    async def noted_load(session_id: str) -> Agent:
        try:
            return await ensure_loaded(session_id)
        finally:
            loaded.set()

    monkeypatch.setattr(environment, "open_notebook", held_open)
    monkeypatch.setattr(runtime, "ensure_loaded", noted_load)
    runtime.mailbox.send(parent, "are you there?", "child", "kid")
    await reached.wait()

    attaching = asyncio.ensure_future(host.attach("a.agents/kid.ipynb", session_id=kid_id))
    await wait_for(lambda: attaching.done() or waits_on(runtime.loading_lock(kid_id)))
    go.set()
    await loaded.wait()
    attached = await attaching

    assert host.agents[kid_id] is attached  # one agent on the session, not two
    await wait_for(lambda: attached.session.turns() == 1)  # the message reached it
