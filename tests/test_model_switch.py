"""Model and cost (docs/pairing.md, section 2) on a real jupyter_server: the models offered
(`GET .../models`, the list of `rlm.find_models()`), a switch (`POST .../model`, `/model`) that the
next model call uses (asserted on the request the real `openai` SDK sent to the local stand-in),
that survives a resume, and each answer's usage and cost in the transcript."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import AsyncMock

import pytest
from tornado.httpclient import HTTPClientError

from prime_agent_lab.core.commands import CommandError, run_command
from prime_agent_lab.core.transcript import chat_transcript
from prime_agent_lab.providers import make_provider

from .conftest import run_turn, use_script, wait_for
from .fake_llm_server import FakeLLMServer, RecordedRequest, Reply
from .test_session_resume import restarted_host

OFFERED = ("openai/gpt-4.1-mini", "scripted/other")


@pytest.fixture
def prime_agent_config() -> dict[str, Any]:
    return {"provider": "scripted", "subagent_models": list(OFFERED)}


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


async def _attach(jp_fetch: Any, path: str) -> str:
    response = await jp_fetch(
        "prime-agent", "api", "sessions", method="POST", body=json.dumps({"notebook_path": path})
    )
    return str(json.loads(response.body)["session_id"])


async def _switch(jp_fetch: Any, session_id: str, model: object) -> Any:
    response = await jp_fetch(
        "prime-agent",
        "api",
        "sessions",
        session_id,
        "model",
        method="POST",
        body=json.dumps({"model": model}),
    )
    return json.loads(response.body)


def _changes(host: Any, session_id: str) -> list[tuple[str, str]]:
    session = host.agent(session_id).session
    return [(e["provider"], e["model"]) for e in session.entries if e["type"] == "model_change"]


async def test_the_models_offered_are_those_of_find_models_with_window_and_price(
    jp_fetch: Any, host: Any
) -> None:
    answer = json.loads((await jp_fetch("prime-agent", "api", "models")).body)

    names = [m["name"] for m in answer["models"]]
    assert names == host.runtime.environment.models() == ["scripted/demo", *OFFERED]
    by_name = {m["name"]: m for m in answer["models"]}
    assert by_name["openai/gpt-4.1-mini"]["context_window"] == 1_047_576
    assert by_name["openai/gpt-4.1-mini"]["price"] == {
        "input": 0.4,
        "output": 1.6,
        "cache_read": 0.1,
        "cache_write": 0.0,
    }
    assert (by_name["scripted/other"]["provider"], by_name["scripted/other"]["model"]) == (
        "scripted",
        "other",
    )
    assert "current" not in answer


async def test_a_model_outside_the_list_is_refused_with_the_list_and_nothing_changes(
    jp_fetch: Any, host: Any, make_notebook: Any
) -> None:
    session_id = await _attach(jp_fetch, make_notebook("bad-model.ipynb"))
    before = _changes(host, session_id)

    for model in ("nope/never", 42, ""):
        with pytest.raises(HTTPClientError) as refused:
            await _switch(jp_fetch, session_id, model)
        assert refused.value.code == 400
        message = json.loads(refused.value.response.body)["message"]
        assert all(name in message for name in OFFERED), message

    assert _changes(host, session_id) == before
    assert host.agent(session_id).chosen_provider.model == "demo"


async def test_a_switch_is_recorded_emitted_and_shown_in_the_session_info(
    jp_fetch: Any, host: Any, make_notebook: Any
) -> None:
    session_id = await _attach(jp_fetch, make_notebook("switch.ipynb"))
    seen: list[dict[str, Any]] = []
    host.agent(session_id).events.add_listener(seen.append)

    answer = await _switch(jp_fetch, session_id, "other")  # a bare model name is enough

    assert answer["current"] == "scripted/other"
    assert _changes(host, session_id)[-1] == ("scripted", "other")
    assert [(e["provider"], e["model"]) for e in seen if e["type"] == "model_change"] == [
        ("scripted", "other")
    ]
    info = json.loads((await jp_fetch("prime-agent", "api", "sessions", session_id)).body)
    assert (info["provider"], info["model"]) == ("scripted", "other")
    again = await _switch(jp_fetch, session_id, "scripted/other")  # the same: nothing recorded
    assert again["current"] == "scripted/other"
    assert _changes(host, session_id).count(("scripted", "other")) == 1


async def test_the_switch_takes_effect_on_the_next_request_and_spares_the_running_call(
    jp_fetch: Any,
    host: Any,
    make_notebook: Any,
    fake_llm: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the real `openai` SDK: the model is switched while the turn's first call is still
    answering; that call finishes on the first model, the turn's next call asks for the new one."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    host.settings = dataclasses.replace(
        host.settings, provider="openai", model="gpt-4.1", subagent_models=OFFERED
    )

    def policy(request: RecordedRequest) -> Reply:
        return Reply("done") if request.turn_tool_results() else Reply.code("x = 1")

    fake_llm.policy = policy
    session_id = await _attach(jp_fetch, make_notebook("sdk-switch.ipynb"))
    agent = host.agent(session_id)
    fake_llm.delay_next(1.5)
    queue = agent.events.subscribe()
    try:
        await host.send(session_id, "go")
        await wait_for(lambda: len(fake_llm.requests) == 1)
        answer = await _switch(jp_fetch, session_id, "openai/gpt-4.1-mini")
        assert answer["current"] == "openai/gpt-4.1-mini"
        async with asyncio.timeout(60):
            while (event := await queue.get())["type"] != "turn_ended":
                pass
    finally:
        agent.events.unsubscribe(queue)

    assert event["stop_reason"] == "end_turn", event
    assert [r.body["model"] for r in fake_llm.requests] == ["gpt-4.1", "gpt-4.1-mini"]
    answered = [e for e in agent.session.path() if e["type"] == "assistant_message"]
    assert [e["model"] for e in answered] == ["gpt-4.1", "gpt-4.1-mini"]
    types = [e["type"] for e in agent.session.path()]
    assert types.index("model_change", types.index("user_message")) < types.index(
        "assistant_message"
    ), "the choice is recorded when it is made, before the running call's answer"

    await run_turn(host, session_id, "again")
    assert fake_llm.requests[-1].body["model"] == "gpt-4.1-mini"


async def test_the_chosen_model_survives_a_resume(
    jp_fetch: Any, host: Any, make_notebook: Any
) -> None:
    path = make_notebook("resume.ipynb")
    session_id = await _attach(jp_fetch, path)
    await _switch(jp_fetch, session_id, "scripted/other")
    await host.shutdown()

    again = restarted_host(host)
    try:
        resumed = await again.attach(path)
        assert resumed.session_id == session_id
        assert (resumed.provider.name, resumed.provider.model) == ("scripted", "other")
        assert resumed.session.current_model() == ("scripted", "other")
        changes = [e for e in resumed.session.entries if e["type"] == "model_change"]
        assert len(changes) == 1, "resuming on the chosen model records no change"
    finally:
        await again.shutdown()


async def test_model_command_shows_the_model_and_the_choices_and_switches(
    host: Any, make_notebook: Any
) -> None:
    agent = await host.attach(make_notebook("command.ipynb"))

    shown = await run_command(host, agent.session_id, "model", "")
    assert shown["view"] == "models"
    assert shown["answer"]["current"] == "scripted/demo"
    assert [m["name"] for m in shown["answer"]["models"]] == ["scripted/demo", *OFFERED]

    switched = await run_command(host, agent.session_id, "model", "scripted/other")
    assert switched["answer"]["current"] == "scripted/other"
    assert agent.session.current_model() == ("scripted", "other")

    with pytest.raises(CommandError) as refused:
        await run_command(host, agent.session_id, "model", "gpt-99")
    assert refused.value.status == 400
    assert "scripted/demo" in refused.value.message


async def test_each_answer_carries_its_model_usage_and_cost_live_and_after_a_reload(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script([{"text": "Hello."}])
    use_script(host, script)
    label = Path(script).name  # a custom script's model is its file name
    agent = await host.attach(make_notebook("footer.ipynb"))
    seen: list[dict[str, Any]] = []
    agent.events.add_listener(seen.append)

    await run_turn(host, agent.session_id, "hi")

    (live,) = [e for e in seen if e["type"] == "assistant_message"]
    assert (live["provider"], live["model"], live["cost"]) == ("scripted", label, 0.0)
    (item,) = [i for i in chat_transcript(agent.session) if i["type"] == "assistant"]
    assert item["usage"] == live["usage"]
    assert (item["provider"], item["model"], item["cost"]) == ("scripted", label, 0.0)
    usage = json.loads(
        (await jp_fetch("prime-agent", "api", "sessions", agent.session_id, "usage")).body
    )
    assert usage["cost_total"] == 0.0 and usage["calls"] == 1


async def test_a_model_chosen_during_a_call_is_released_when_the_agent_goes_before_using_it(
    jp_fetch: Any, host: Any, make_notebook: Any, agent_script: Any
) -> None:
    script = agent_script([{"text": "slow answer"}])
    host._provider_factory = lambda: make_provider(
        "scripted", None, script_path=script, step_delay=30
    )
    session_id = await _attach(jp_fetch, make_notebook("release.ipynb"))
    agent = host.agent(session_id)
    await host.send(session_id, "go")
    await wait_for(lambda: agent._model_calls == 1)

    await _switch(jp_fetch, session_id, "scripted/other")
    chosen = agent.chosen_provider
    assert chosen is not agent.provider, "the call under way keeps its provider"
    chosen.aclose = AsyncMock()  # type: ignore[method-assign]
    await host.shutdown()

    chosen.aclose.assert_awaited_once()
