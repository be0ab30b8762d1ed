"""Sessions survive a host restart, continue where they were, and never replay a cut turn."""

from __future__ import annotations

from typing import Any

import pytest

from prime_agent_lab.core.sessions import SessionRepository
from prime_agent_lab.jupyter.host import AgentHost, HostError
from prime_agent_lab.providers import make_provider

from .conftest import run_turn, use_script


def restarted_host(host: Any, provider: str = "scripted", script: str | None = None) -> AgentHost:
    """A fresh host on the same server and sessions directory: all in-memory state is gone."""
    return AgentHost(
        host.serverapp,
        SessionRepository(host.repository.root),
        host.settings,
        lambda: make_provider(
            provider, "other-model" if provider != "scripted" else None, script_path=script
        ),
    )


async def test_a_session_continues_after_the_host_restarts(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script(
        [
            {"code": "n = 1\nprint(n)"},
            {"text": "first done"},
            {"text": "second: {last_output_line}"},
        ]
    )
    use_script(host, script)
    path = make_notebook("resume.ipynb")
    first = await host.attach(path)
    await run_turn(host, first.session_id, "one")
    await host.shutdown()

    again = restarted_host(host, script=script)
    try:
        resumed = await again.attach(path)
        assert resumed.session_id == first.session_id
        assert resumed.session.turns() == 1

        ended = await run_turn(again, resumed.session_id, "two")

        assert ended["turn"] == 2
        # The scripted model picks its step from the history it is sent, so the third step
        # playing proves the model saw the whole earlier turn.
        assert ended["final_text"] == "second: 1"
    finally:
        await again.shutdown()


async def test_a_turn_cut_by_a_crash_is_marked_interrupted_when_the_session_is_reopened(
    host: Any, make_notebook: Any
) -> None:
    path = make_notebook("crash.ipynb")
    log = host.repository.create(notebook_path=path, provider="scripted", model="demo")
    log.append("user_message", text="cut short", turn=1)  # the server died here

    agent = await host.attach(path)

    assert agent.session_id == log.session_id
    last = agent.session.path()[-1]
    assert (last["type"], last["stop_reason"], last["turn"]) == ("turn_end", "interrupted", 1)
    assert not agent.running


async def test_continuing_on_another_model_records_the_change(
    host: Any, make_notebook: Any
) -> None:
    path = make_notebook("switch.ipynb")
    first = await host.attach(path)
    await host.shutdown()

    again = restarted_host(host, provider="openai")
    try:
        resumed = await again.attach(path)
        change = resumed.session.last_of("model_change")
        assert resumed.session_id == first.session_id
        assert change is not None and (change["provider"], change["model"]) == (
            "openai",
            "other-model",
        )
    finally:
        await again.shutdown()


async def test_a_new_session_can_be_started_on_the_same_notebook(
    host: Any, make_notebook: Any
) -> None:
    path = make_notebook("fresh.ipynb")
    first = await host.attach(path)
    second = await host.attach(path, new=True)
    assert second.session_id != first.session_id
    assert {s["session_id"] for s in await host.list_sessions()} >= {
        first.session_id,
        second.session_id,
    }


async def test_one_kernel_has_one_agent_so_bridge_identity_is_never_mixed(
    host: Any, make_notebook: Any
) -> None:
    path = make_notebook("two.ipynb")
    first = await host.attach(path)
    second = await host.attach(path, new=True)
    kernel_id = second.kernel.kernel_id
    assert first.kernel.kernel_id == kernel_id
    assert host.bridge._session_for_kernel(kernel_id) == second.session_id
    assert first.session_id not in host.agents  # inactive: on disk, attachable again
    again = await host.attach(path, session_id=first.session_id)
    assert host.bridge._session_for_kernel(kernel_id) == again.session_id == first.session_id


def inactive_events(agent: Any) -> list[dict[str, Any]]:
    return [e for e in agent.events.since(0) if e["type"] == "status" and e["status"] == "inactive"]


async def test_the_inactive_event_names_the_session_that_took_the_notebook_over(
    host: Any, make_notebook: Any
) -> None:
    """Viewers of the detached session tell a takeover from a session that merely unloaded."""
    path = make_notebook("taken.ipynb")
    first = await host.attach(path)
    second = await host.attach(path, new=True)
    (gone,) = inactive_events(first)
    assert gone["taken_over_by"] == second.session_id
    again = await host.attach(path, session_id=first.session_id)
    (gone,) = inactive_events(second)
    assert gone["taken_over_by"] == again.session_id == first.session_id
    await host.runtime.detach(again)  # unloaded, nobody took over
    assert [e.get("taken_over_by") for e in inactive_events(again)] == [None]


async def test_switching_sessions_is_refused_while_a_turn_runs_on_the_kernel(
    host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script([{"code": "import time\ntime.sleep(30)"}, {"text": "x"}])
    use_script(host, script)
    path = make_notebook("busy.ipynb")
    first = await host.attach(path)
    await host.send(first.session_id, "sleep")
    with pytest.raises(HostError) as refused:
        await host.attach(path, new=True)
    assert refused.value.status == 409
    assert [a.session_id for a in host.agents.values() if a.notebook.path == path] == [
        first.session_id
    ]
    await host.stop(first.session_id)
