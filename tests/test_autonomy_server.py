"""The panel's Autonomous switch on a real jupyter_server: `GET`/`PUT .../autonomy`, an autonomous
run started by a message, its gates in the notebook's folder, its `autonomy` events, and Stop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from prime_agent_lab.core.entry_types import autonomy_line
from prime_agent_lab.core.stop_cause import SERVER_SHUTDOWN

from .conftest import next_event, run_turn, use_script, wait_for
from .test_heartbeats import FakeTime, arm, fake_time  # noqa: F401  (the fixture)
from .test_heartbeats import attach as attach_agent
from .test_heartbeats import command as heartbeat_command
from .test_subagents import WAIT_FOR_CHILDREN, write_script
from .test_subagents_server import tree_script

DEFAULT_BUDGETS = {
    "max_turns": 12,
    "max_tokens": 80000,
    "timeout_minutes": 30.0,
    "continuations": 3,
}


async def _autonomy(jp_fetch: Any, session_id: str, body: dict[str, Any] | None = None) -> Any:
    path = ("prime-agent", "api", "sessions", session_id, "autonomy")
    if body is None:
        return json.loads((await jp_fetch(*path)).body)
    return json.loads((await jp_fetch(*path, method="PUT", body=json.dumps(body))).body)


async def _attach(jp_fetch: Any, path: str) -> str:
    response = await jp_fetch(
        "prime-agent", "api", "sessions", method="POST", body=json.dumps({"notebook_path": path})
    )
    return str(json.loads(response.body)["session_id"])


async def test_the_switch_runs_the_next_message_autonomously_until_its_gate_passes(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any, jp_root_dir: Path
) -> None:
    use_script(
        host,
        agent_script(
            [
                {"text": "Done."},
                {"text": "Fixing.", "code": "open('done.txt', 'w').write('ok')"},
                {"text": "Fixed."},
            ]
        ),
    )
    session_id = await _attach(jp_fetch, make_notebook("work/auto.ipynb"))
    assert await _autonomy(jp_fetch, session_id) == {
        "enabled": False,
        "budgets": DEFAULT_BUDGETS,
        "gates": [],
        "run": None,
    }
    budgets = {**DEFAULT_BUDGETS, "max_turns": 6}
    state = await _autonomy(
        jp_fetch, session_id, {"enabled": True, "budgets": budgets, "gates": ["test -f done.txt"]}
    )
    assert (state["enabled"], state["budgets"], state["gates"]) == (
        True,
        budgets,
        ["test -f done.txt"],
    )
    agent = host.agent(session_id)
    queue = agent.events.subscribe()
    await jp_fetch(
        "prime-agent", "api", "sessions", session_id, "messages",
        method="POST", body=json.dumps({"text": "make done.txt"}),
    )  # fmt: skip
    started = await next_event(queue, "autonomy")
    assert started["state"]["run"]["reason"] is None
    await wait_for(lambda: not agent.running, timeout=60)

    assert (jp_root_dir / "work" / "done.txt").read_text() == "ok"  # the notebook's folder
    state = await _autonomy(jp_fetch, session_id)
    assert state["enabled"] is True
    assert (state["run"]["reason"], state["run"]["turns"]) == ("gates_passed", 3)
    events = [queue.get_nowait() for _ in range(queue.qsize())]
    gates = [e for e in events if e["type"] == "gate_run"]
    assert [g["passed"] for g in gates] == [False, True]
    assert events[-1]["type"] in ("autonomy", "status")

    detail = json.loads((await jp_fetch("prime-agent", "api", "sessions", session_id)).body)
    lines = [i["text"] for i in detail["transcript"] if i["type"] == "notice"]
    assert any(line.startswith("Gate `test -f done.txt` failed (exit 1") for line in lines)
    assert any(
        line.startswith("Autonomous run ended: gates passed after 3 turns") for line in lines
    )

    host.runtime.autonomy._configs.clear()  # as after a restart: the session's log says it
    assert (await _autonomy(jp_fetch, session_id))["enabled"] is True


async def _running_autonomously(
    jp_fetch: Any, host: Any, notebook: str, agent_script: Any
) -> tuple[str, Any]:
    """A session in autonomous mode whose run is in a cell that sleeps a minute: its id, agent."""
    use_script(host, agent_script([{"text": "Working.", "code": "import time; time.sleep(60)"}]))
    session_id = await _attach(jp_fetch, notebook)
    await _autonomy(jp_fetch, session_id, {"enabled": True})
    agent = host.agent(session_id)
    await host.send(session_id, "go")
    await wait_for(lambda: agent.current_cell_id is not None, timeout=60)
    return session_id, agent


async def test_stop_ends_the_run_and_turns_the_switch_off(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    session_id, agent = await _running_autonomously(
        jp_fetch, host, make_notebook("stop.ipynb"), agent_script
    )
    await jp_fetch("prime-agent", "api", "sessions", session_id, "stop", method="POST", body="{}")
    await wait_for(lambda: not agent.running, timeout=60)
    state = await _autonomy(jp_fetch, session_id)
    assert (state["enabled"], state["run"]["reason"]) == (False, "stopped")


async def test_a_server_shutdown_during_a_run_leaves_the_switch_on(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    session_id, _ = await _running_autonomously(
        jp_fetch, host, make_notebook("shutdown.ipynb"), agent_script
    )
    await host.runtime.stop_all(SERVER_SHUTDOWN)
    state = await _autonomy(jp_fetch, session_id)
    assert (state["enabled"], state["run"]["reason"]) == (True, "stopped")
    host.runtime.autonomy._configs.clear()  # as after the restart: the session's log says it
    assert (await _autonomy(jp_fetch, session_id))["enabled"] is True


@pytest.mark.parametrize(
    "body, says",
    [
        ({"enabled": "yes"}, "enabled must be true or false"),
        ({"enabled": True, "gates": "pytest"}, "gates must be a list of strings"),
        ({"enabled": True, "gates": ["py:assert ("]}, "py: gate does not compile"),
        ({"enabled": True, "budgets": {"max_turns": 0}}, "budgets.max_turns"),
        ({"enabled": True, "budgets": {"turns": 3}}, "no field turns"),
    ],
)
async def test_a_bad_update_is_refused_clearly_and_changes_nothing(
    jp_fetch: Any, host: Any, make_notebook: Any, body: dict[str, Any], says: str
) -> None:
    session_id = await _attach(jp_fetch, make_notebook("bad.ipynb"))
    with pytest.raises(HTTPClientError) as refused:
        await _autonomy(jp_fetch, session_id, body)
    assert refused.value.code == 400
    assert says in json.loads(refused.value.response.body)["message"]
    assert (await _autonomy(jp_fetch, session_id))["enabled"] is False


async def test_a_sub_agent_cannot_be_switched_on_its_parent_can(
    jp_fetch: Any, host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    spawn = 'a = await rlm("alpha words", name="alpha")'
    script = [{"code": spawn}, {"code": WAIT_FOR_CHILDREN}, {"text": "{last_output_line}"}]
    use_script(host, tree_script(tmp_path, script))
    parent_id = await _attach(jp_fetch, make_notebook("family.ipynb"))
    await run_turn(host, parent_id, "fan out")
    (child,) = [a for a in host.agents.values() if a.session_id != parent_id]
    assert (await _autonomy(jp_fetch, child.session_id))["enabled"] is False
    with pytest.raises(HTTPClientError) as refused:
        await _autonomy(jp_fetch, child.session_id, {"enabled": True})
    assert refused.value.code == 409
    assert "switch on its parent" in json.loads(refused.value.response.body)["message"]
    assert (await _autonomy(jp_fetch, parent_id, {"enabled": True}))["enabled"] is True


def _long_child_script(tmp_path: Path, cells: int, seconds: float) -> str:
    """The parent spawns `w1` and then says it is done; `w1` runs `cells` cells of `seconds`."""
    parent = [{"code": 'h = await rlm("long task", name="w1")'}, {"text": "done"}]
    cell = {"code": f"import time; time.sleep({seconds})"}
    child = {"turns": [cell] * cells + [{"text": "did it"}]}
    return write_script(tmp_path, parent, child)


def _child_of(host: Any, parent_id: str) -> Any:
    return next((a for a in host.agents.values() if a.session_id != parent_id), None)


async def test_a_run_waits_for_its_sub_agents_under_its_budget_and_stops_them_when_it_ends(
    jp_fetch: Any, host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    use_script(host, _long_child_script(tmp_path, 40, 0.3))
    session_id = await _attach(jp_fetch, make_notebook("tree.ipynb"))
    budgets = {"max_tokens": 15000}
    await _autonomy(jp_fetch, session_id, {"enabled": True, "budgets": budgets, "gates": ["true"]})
    agent = host.agent(session_id)
    await host.send(session_id, "go")
    await wait_for(lambda: not agent.running, timeout=120)

    state = (await _autonomy(jp_fetch, session_id))["run"]
    assert state["reason"] == "max_tokens"  # not `gates_passed` while w1 still worked
    assert 15000 <= state["tokens"] < 15000 + 5000  # one model call past the budget at most
    assert not [e for e in agent.session.entries if e["type"] == "gate_run"]
    child = _child_of(host, session_id)
    await wait_for(lambda: not child.running, timeout=30)
    calls = [e for e in child.session.entries if e["type"] == "assistant_message"]
    assert len(calls) < 20
    await asyncio.sleep(1.5)
    assert (await _autonomy(jp_fetch, session_id))["run"] == state  # frozen at its end


async def test_a_run_ended_by_stop_stops_the_sub_agents_still_working_and_says_so(
    jp_fetch: Any, host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    use_script(host, _long_child_script(tmp_path, 3, 60))
    session_id = await _attach(jp_fetch, make_notebook("stopped.ipynb"))
    await _autonomy(jp_fetch, session_id, {"enabled": True, "gates": ["true"]})
    agent = host.agent(session_id)
    await host.send(session_id, "go")
    child = await wait_for(lambda: _child_of(host, session_id), timeout=60)
    await wait_for(lambda: child.current_cell_id is not None, timeout=60)
    assert agent.running  # waiting for w1 before its gate
    await jp_fetch("prime-agent", "api", "sessions", session_id, "stop", method="POST", body="{}")
    await wait_for(lambda: not agent.running and not child.running, timeout=60)

    (ended,) = [e for e in agent.session.entries if e.get("event") == "ended"]
    assert (ended["reason"], ended["stopped_sub_agents"]) == ("stopped", ["w1"])
    assert autonomy_line(ended).endswith("; it stopped the sub-agents still working: w1")
    end = child.session.last_of("turn_end")
    assert end["stop_reason"] == "stopped"
    (cut,) = [e for e in child.session.entries if e["type"] == "tool_result"]
    assert "the autonomous run it worked for ended (stopped)" in cut["observation"].lower()


async def test_only_a_turn_the_user_starts_is_an_autonomous_run_not_a_heartbeat_tick(
    jp_fetch: Any,
    host: Any,
    make_notebook: Any,
    agent_script: Any,
    fake_time: FakeTime,  # noqa: F811  (the fixture imported above)
) -> None:
    agent = await attach_agent(
        host, agent_script, make_notebook("ticks.ipynb"), [{"text": "checked"}, {"text": "done"}]
    )
    budgets = {"continuations": 0}
    await _autonomy(jp_fetch, agent.session_id, {"enabled": True, "budgets": budgets})
    await heartbeat_command(host, agent, "every 10s check the log")
    await arm(host)
    fake_time.advance(10)
    await wait_for(lambda: agent.session.last_of("turn_end") is not None)
    assert agent.session.last_of("user_message")["schedule_id"]
    assert agent.session.last_of("autonomy")["event"] == "configured"  # no run started
    assert (await _autonomy(jp_fetch, agent.session_id))["run"] is None

    await run_turn(host, agent.session_id, "now you")
    run = (await _autonomy(jp_fetch, agent.session_id))["run"]
    assert (run["reason"], run["turns"]) == ("continuations_used", 1)


async def test_what_a_settled_sub_agent_said_is_read_in_the_run_before_its_gates(
    jp_fetch: Any, host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    parent = [
        {"code": 'h = await rlm("short task", name="w1")'},
        {"text": "done"},
        {"text": "noted what w1 said"},
    ]
    child = {"turns": [{"code": "x = 1"}, {"text": "did it"}]}
    use_script(host, write_script(tmp_path, parent, child))
    session_id = await _attach(jp_fetch, make_notebook("heard.ipynb"))
    await _autonomy(jp_fetch, session_id, {"enabled": True, "gates": ["true"]})
    agent = host.agent(session_id)
    await host.send(session_id, "go")
    await wait_for(lambda: agent.session.last_of("autonomy") is not None, timeout=60)
    await wait_for(lambda: agent.session.last_of("autonomy").get("event") == "ended", timeout=120)
    await wait_for(lambda: not agent.running, timeout=60)

    path = agent.session.path()
    assert agent.session.turns() == 1  # the sub-agent's notice started no turn of its own
    heard = [e for e in path if e["type"] == "agent_message" and e.get("notice")]
    assert [e["turn"] for e in heard] == [1]
    gate = next(i for i, e in enumerate(path) if e["type"] == "gate_run")
    assert path.index(heard[0]) < gate  # read before the gate ran
    assert agent.session.last_of("autonomy")["reason"] == "gates_passed"
    assert agent.session.last_of("turn_end")["final_text"] == "noted what w1 said"
