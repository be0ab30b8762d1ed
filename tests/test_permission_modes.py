"""Permission modes on the real server (docs/pairing.md, section 4): in `ask` mode each agent cell
is written to the notebook and waits for Run, Edit or Skip; in `plan` mode no cell runs; the
administrator's `max_permission` caps the choice; the mode is in the session log, so a reload
or a resume keeps it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.permission import SKIPPED_OBSERVATION
from prime_agent_lab.core.permission_texts import PLAN_OBSERVATION
from prime_agent_lab.core.transcript import chat_transcript

from .conftest import next_event, use_script, wait_for
from .test_messaging import restarted_host
from .test_rest_edges import message_of, post
from .test_server_e2e import live_agent_cells


async def put_mode(jp_fetch: Any, session_id: str, mode: Any) -> Any:
    route = ("prime-agent", "api", "sessions", session_id, "permission")
    body = json.dumps({"mode": mode})
    return await jp_fetch(*route, method="PUT", body=body, raise_error=False)


async def decide(jp_fetch: Any, agent: Agent, call_id: str, action: str, **body: Any) -> Any:
    route = ("sessions", agent.session_id, "cells", call_id, action)
    return await post(jp_fetch, *route, body=body)


def results(agent: Agent) -> list[dict[str, Any]]:
    return [e for e in agent.session.entries if e["type"] == "tool_result"]


async def asking_session(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, name: str
) -> tuple[Agent, Any, dict[str, Any]]:
    """A session in ask mode whose turn wrote one cell (`print(6 * 7)`) that waits."""
    use_script(host, agent_script([{"code": "print(6 * 7)"}, {"text": "done"}]))
    agent: Agent = await host.attach(make_notebook(name))
    answer = await put_mode(jp_fetch, agent.session_id, "ask")
    assert answer.code == 200, answer.body
    assert json.loads(answer.body) == {"mode": "ask", "cap": "auto", "waiting": []}
    events = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    waiting = await next_event(events, "cell_awaiting_approval", timeout=60)
    return agent, events, waiting


async def test_ask_mode_waits_for_approval_and_then_the_model_reads_the_output(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent, events, waiting = await asking_session(
        host, jp_fetch, make_notebook, agent_script, "ask.ipynb"
    )
    assert waiting["code"] == "print(6 * 7)"
    state = await jp_fetch("prime-agent", "api", "sessions", agent.session_id, "permission")
    assert json.loads(state.body)["waiting"] == [waiting["tool_call_id"]]
    assert results(agent) == [] and agent.running  # nothing ran yet

    answer = await decide(jp_fetch, agent, waiting["tool_call_id"], "approve")
    assert answer.code == 200, answer.body
    await next_event(events, "turn_ended", timeout=60)

    (result,) = results(agent)
    assert result["status"] == "ok" and "42" in result["observation"]
    approval = [e for e in agent.session.entries if e["type"] == "cell_approval"]
    assert [a["decision"] for a in approval] == ["run"]
    again = await decide(jp_fetch, agent, waiting["tool_call_id"], "approve")
    assert again.code == 409, again.body
    unknown = await decide(jp_fetch, agent, "no-such-call", "skip")
    assert unknown.code == 404, unknown.body


async def test_permission_and_model_bodies_are_refused_field_by_field_and_answers_are_current(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent, events, waiting = await asking_session(
        host, jp_fetch, make_notebook, agent_script, "fields.ipynb"
    )
    call_id, sid = waiting["tool_call_id"], agent.session_id

    extra = await decide(jp_fetch, agent, call_id, "approve", code="print(1)", extra=1)
    assert extra.code == 400 and "unknown field 'extra'" in message_of(extra), extra.body
    coded_skip = await decide(jp_fetch, agent, call_id, "skip", code="print(1)")
    assert coded_skip.code == 400 and "unknown field 'code'" in message_of(coded_skip)
    assert agent.permission.waiting() == [call_id]  # nothing was answered
    shouted = await put_mode(jp_fetch, sid, "AUTO")
    assert shouted.code == 400 and message_of(shouted).endswith("not 'AUTO'"), shouted.body
    mode_extra = await jp_fetch(
        "prime-agent",
        "api",
        "sessions",
        sid,
        "permission",
        method="PUT",
        body=json.dumps({"mode": "ask", "now": True}),
        raise_error=False,
    )
    assert mode_extra.code == 400 and "unknown field 'now'" in message_of(mode_extra)
    listed = await post(jp_fetch, "sessions", sid, "model", body={"model": ["scripted/demo"]})
    assert listed.code == 400 and message_of(listed).startswith(
        "model must be a string, not an array"
    )
    model_extra = await post(
        jp_fetch, "sessions", sid, "model", body={"model": "scripted/demo", "why": "x"}
    )
    assert model_extra.code == 400 and "unknown field 'why'" in message_of(model_extra)
    assert agent.permission.mode == "ask"

    answer = await decide(jp_fetch, agent, call_id, "approve")
    assert answer.code == 200, answer.body
    assert json.loads(answer.body) == {"mode": "ask", "cap": "auto", "waiting": []}
    await next_event(events, "turn_ended", timeout=60)


async def test_skip_tells_the_model_the_user_skipped_the_cell(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent, events, waiting = await asking_session(
        host, jp_fetch, make_notebook, agent_script, "skip.ipynb"
    )
    answer = await decide(jp_fetch, agent, waiting["tool_call_id"], "skip")
    assert answer.code == 200, answer.body
    skipped = await next_event(events, "cell_skipped")
    assert skipped["cell_id"] == waiting["cell_id"]
    await next_event(events, "turn_ended", timeout=60)
    (result,) = results(agent)
    assert result["status"] == "skipped" and result["observation"] == SKIPPED_OBSERVATION
    context = json.dumps([m.__dict__ for m in agent.session.context_messages()], default=str)
    assert "the user skipped this cell" in context


async def test_edit_runs_the_edited_code_and_the_session_keeps_both(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent, events, waiting = await asking_session(
        host, jp_fetch, make_notebook, agent_script, "edit.ipynb"
    )
    call_id = waiting["tool_call_id"]
    answer = await decide(jp_fetch, agent, call_id, "approve", code="print(6 * 9)")
    assert answer.code == 200, answer.body
    approved = await next_event(events, "cell_approved")
    assert approved["edited"] is True
    await next_event(events, "turn_ended", timeout=60)

    (result,) = results(agent)
    assert "54" in result["observation"] and "42" not in result["observation"]
    assert result["observation"].startswith("[edited] The user edited your code")  # told first
    assert "print(6 * 9)" in result["observation"]
    assert result["cell_id"] != waiting["cell_id"]  # the edited code ran in a new cell
    (approval,) = [e for e in agent.session.entries if e["type"] == "cell_approval"]
    assert (approval["decision"], approval["code"]) == ("edit", "print(6 * 9)")
    (asked,) = [e for e in agent.session.entries if e["type"] == "assistant_message"][:1]
    assert "print(6 * 7)" in asked["tool_calls"][0]["arguments"]  # the model's own code too


async def test_a_skipped_cell_says_skip_live_and_after_a_reload(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent, events, waiting = await asking_session(
        host, jp_fetch, make_notebook, agent_script, "skip-words.ipynb"
    )
    await decide(jp_fetch, agent, waiting["tool_call_id"], "skip")
    skipped = await next_event(events, "cell_skipped")
    assert skipped.get("decision") == "skip"
    finished = await next_event(events, "cell_finished")
    assert (finished["status"], finished.get("decision")) == ("skipped", "skip")
    await next_event(events, "turn_ended", timeout=60)
    (line,) = [i for i in chat_transcript(agent.session) if i["type"] == "cell"]
    assert (line["cell_id"], line["status"]) == (waiting["cell_id"], "skipped")
    assert line.get("decision") == "skip"


async def test_an_edited_cell_says_edit_live_and_after_a_reload_with_the_edited_code_next(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent, events, waiting = await asking_session(
        host, jp_fetch, make_notebook, agent_script, "edit-words.ipynb"
    )
    await decide(jp_fetch, agent, waiting["tool_call_id"], "approve", code="print(6 * 9)")
    finished = await next_event(events, "cell_finished")
    assert (finished["cell_id"], finished.get("decision")) == (waiting["cell_id"], "edit")
    await next_event(events, "turn_ended", timeout=60)
    lines = [i for i in chat_transcript(agent.session) if i["type"] == "cell"]
    assert [(i["status"], i.get("decision"), i["code"]) for i in lines] == [
        ("skipped", "edit", "print(6 * 7)"),
        ("ok", None, "print(6 * 9)"),
    ]
    assert lines[0]["cell_id"] == waiting["cell_id"]


async def test_a_cell_withdrawn_by_stop_names_no_decision(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent, events, _waiting = await asking_session(
        host, jp_fetch, make_notebook, agent_script, "stop-words.ipynb"
    )
    assert await host.stop(agent.session_id)
    skipped = await next_event(events, "cell_skipped")
    assert "decision" not in skipped
    finished = await next_event(events, "cell_finished")
    assert finished["status"] == "skipped" and "decision" not in finished
    await wait_for(lambda: not agent.running)
    (line,) = [i for i in chat_transcript(agent.session) if i["type"] == "cell"]
    assert line["status"] == "skipped" and "decision" not in line


async def test_plan_mode_shows_a_line_with_the_code_it_did_not_run_live_and_after_a_reload(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    use_script(host, agent_script([{"code": "print(6 * 7)"}, {"text": "a plan in words"}]))
    agent: Agent = await host.attach(make_notebook("plan-line.ipynb"))
    assert (await put_mode(jp_fetch, agent.session_id, "plan")).code == 200
    events = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    notice = await next_event(events, "notice", timeout=60)
    assert (notice["kind"], notice["code"]) == ("plan_not_run", "print(6 * 7)")
    assert "plan mode" in notice["text"]
    await next_event(events, "turn_ended", timeout=60)
    (line,) = [i for i in chat_transcript(agent.session) if i.get("kind") == "plan_not_run"]
    assert (line["type"], line["turn"], line["code"]) == ("notice", 1, "print(6 * 7)")
    assert line["text"] == notice["text"]


async def test_plan_mode_never_runs_a_cell_and_tells_the_model(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "ran.txt"
    code = f"open({str(marker)!r}, 'w').write('x')"
    use_script(host, agent_script([{"code": code}, {"text": "a plan in words"}]))
    agent: Agent = await host.attach(make_notebook("plan.ipynb"))
    assert (await put_mode(jp_fetch, agent.session_id, "plan")).code == 200
    events = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    ended = await next_event(events, "turn_ended", timeout=60)

    assert ended["final_text"] == "a plan in words"
    assert not marker.exists()
    (result,) = results(agent)
    assert (result["status"], result["cell_id"]) == ("skipped", None)
    assert result["observation"] == PLAN_OBSERVATION
    assert not any(e["type"] == "cell_started" for e in agent.session.entries)


async def test_a_mode_above_max_permission_is_refused_with_403(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    use_script(host, agent_script([{"text": "hi"}]), max_permission="ask")
    agent: Agent = await host.attach(make_notebook("cap.ipynb"))
    assert agent.permission.mode == "ask"  # the default auto, held to the cap

    refused = await put_mode(jp_fetch, agent.session_id, "auto")
    assert refused.code == 403
    assert "max_permission" in message_of(refused) and "'ask'" in message_of(refused)
    assert agent.permission.mode == "ask"
    unknown = await put_mode(jp_fetch, agent.session_id, "yolo")
    assert unknown.code == 400 and "plan, ask, auto" in message_of(unknown)
    assert (await put_mode(jp_fetch, agent.session_id, "plan")).code == 200


async def test_the_mode_survives_a_server_restart_and_resume(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script([{"text": "hi"}])
    use_script(host, script)
    path = make_notebook("resume.ipynb")
    agent: Agent = await host.attach(path)
    assert (await put_mode(jp_fetch, agent.session_id, "plan")).code == 200
    await host.shutdown()

    again = restarted_host(host, script)
    try:
        resumed = await again.attach(path)
        assert resumed.session_id == agent.session_id
        assert resumed.permission.mode == "plan"
        assert sum(e["type"] == "permission_change" for e in resumed.session.entries) == 1
        await again.shutdown()
    finally:
        host.serverapp.web_app.settings["prime_agent_host"] = host


async def test_stop_while_a_cell_waits_for_approval_ends_the_turn_and_runs_nothing(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent, _events, waiting = await asking_session(
        host, jp_fetch, make_notebook, agent_script, "stop.ipynb"
    )
    assert await host.stop(agent.session_id)
    await wait_for(lambda: not agent.running)
    ended = [e for e in agent.session.entries if e["type"] == "turn_end"]
    assert ended[-1]["stop_reason"] == "stopped"
    (result,) = results(agent)
    assert (
        result["status"] == "skipped" and "waited for the user's approval" in result["observation"]
    )
    assert agent.permission.waiting() == []
    late = await decide(jp_fetch, agent, waiting["tool_call_id"], "approve")
    assert late.code == 409


async def test_a_new_session_starts_in_the_configured_mode_and_the_waiting_cell_is_marked(
    host: Any, jp_serverapp: Any, make_notebook: Any, agent_script: Any
) -> None:
    use_script(host, agent_script([{"code": "print(1)"}, {"text": "done"}]), permission="ask")
    agent: Agent = await host.attach(make_notebook("default.ipynb"))
    assert agent.permission.mode == "ask"
    assert [e["mode"] for e in agent.session.entries if e["type"] == "permission_change"] == ["ask"]
    events = agent.events.subscribe()
    await host.send(agent.session_id, "go")
    waiting = await next_event(events, "cell_awaiting_approval", timeout=60)

    async def marked() -> bool:
        cells = await live_agent_cells(jp_serverapp, agent.notebook.path)
        return any(
            c["metadata"]["prime_agent"].get("permission") == "ask"
            and "waiting for your approval" in json.dumps(c["outputs"])
            for c in cells
        )

    await wait_for(marked)
    agent.skip(waiting["tool_call_id"])
    await next_event(events, "turn_ended", timeout=60)


async def test_a_server_shutdown_while_a_cell_waits_records_it_as_not_run(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    agent, _events, _waiting = await asking_session(
        host, jp_fetch, make_notebook, agent_script, "shutdown.ipynb"
    )
    await host.shutdown()

    (result,) = results(agent)
    assert (
        result["status"] == "skipped" and "waited for the user's approval" in result["observation"]
    )
    assert [e for e in agent.session.entries if e["type"] == "turn_end"][-1]["stop_reason"] == (
        "shutdown"
    )
