"""Deleting a session (`DELETE .../sessions/<id>`) against what loads sessions behind the user's
back: a message or a heartbeat tick brings an inactive sub-agent back (core/mailbox.py,
`AgentRuntime.ensure_loaded`). Each interleaving is forced with hooks, never with sleeps, on a
real server with real kernels (docs/pairing.md, section 1)."""

from __future__ import annotations

import asyncio
import threading
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
