"""Refine on the server: the REST routes, a global rollback from another session, auto-refine
for root agents only; and one planner call through each vendor's real SDK."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.harness.store import HarnessStore
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.headless import HeadlessRun
from tests.conftest import next_event, run_turn, use_script
from tests.fake_llm_server import FakeLLMServer, RecordedRequest, Reply
from tests.test_refine import WAIT_UNTIL_PLANNED, fenced
from tests.test_subagents import CHILD, WAIT_FOR_CHILDREN

GLOBAL_PROPOSAL = {
    "summary": "share the house style",
    "edits": [{"action": "create", "kind": "memory", "title": "house style", "content": "short"}],
}


@pytest.fixture
def prime_agent_config(tmp_path: Path) -> dict[str, Any]:
    return {"harness_dir": str(tmp_path / "global-harness")}


def script(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "refine-script.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


async def call(jp_fetch: Any, method: str, *route: str, body: Any = None) -> tuple[int, Any]:
    response = await jp_fetch(
        "prime-agent",
        "api",
        *route,
        method=method,
        body=None if body is None else json.dumps(body),
        raise_error=False,
    )
    return response.code, json.loads(response.body)


async def test_rest_refine_lists_and_a_global_rollback_from_another_session(
    host: Any, jp_fetch: Any, make_notebook: Any, tmp_path: Path
) -> None:
    side = {"refine": [{"text": json.dumps(GLOBAL_PROPOSAL)}]}
    use_script(host, script(tmp_path, {"turns": [{"text": "ok"}], "side": side}))
    first = await host.attach(make_notebook("first.ipynb"))
    second = await host.attach(make_notebook("second.ipynb"))
    events = first.events.subscribe()

    code, answer = await call(
        jp_fetch, "POST", "sessions", first.session_id, "refine", body={"global": True}
    )
    assert code == 202 and answer["scheduled"] is True, answer
    event = await next_event(events, "refinement")
    record = event["refinement"]
    assert (record["scope"], record["trigger"], record["session_id"]) == (
        "global",
        "user",
        first.session_id,
    )
    shared = HarnessStore(tmp_path / "global-harness", "global")
    assert shared.get("memory", "house_style").content == "short"

    # The second session sees the global record and rolls it back.
    code, listed = await call(jp_fetch, "GET", "sessions", second.session_id, "refinements")
    assert code == 200
    assert [(r["id"], r["scope"]) for r in listed["refinements"]] == [(record["id"], "global")]
    code, rolled = await call(
        jp_fetch,
        "POST",
        "sessions",
        second.session_id,
        "refinements",
        record["id"],
        "rollback",
        body={},
    )
    assert code == 200 and rolled["applied"] is True and rolled["note"] == "applied", rolled
    assert rolled["refinement"]["rollback_of"] == record["id"]
    assert rolled["refinement"]["session_id"] == second.session_id
    assert shared.get("memory", "house_style") is None
    code, listed = await call(jp_fetch, "GET", "sessions", first.session_id, "refinements")
    assert [r.get("rollback_of") for r in listed["refinements"]] == [None, record["id"]]


async def test_rest_refine_refuses_bad_input_and_unknown_refinements(
    host: Any, jp_fetch: Any, make_notebook: Any, tmp_path: Path
) -> None:
    use_script(host, script(tmp_path, {"turns": [{"text": "ok"}]}))
    agent = await host.attach(make_notebook("bad.ipynb"))
    sid = agent.session_id
    code, answer = await call(jp_fetch, "POST", "sessions", sid, "refine", body={"global": "yes"})
    assert code == 400 and "global must be true or false" in answer["message"]
    code, answer = await call(jp_fetch, "POST", "sessions", sid, "refine", body={"instructions": 5})
    assert code == 400 and "instructions must be a string" in answer["message"]
    code, answer = await call(
        jp_fetch, "POST", "sessions", sid, "refinements", "refine_nope", "rollback", body={}
    )
    assert code == 404 and "no refinement 'refine_nope'" in answer["message"]
    code, answer = await call(jp_fetch, "GET", "sessions", "nobody", "refinements")
    assert code == 404
    assert host.runtime.refiners.get(sid).status()["pending"] == 0


async def test_auto_refine_reviews_root_agents_only(
    host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    spawn = 'a = await rlm("alpha words", name="alpha")\nprint(a.notebook_path)'
    turns = [{"code": spawn}, {"code": WAIT_FOR_CHILDREN}, {"text": "{last_output_line}"}]
    use_script(host, script(tmp_path, {"turns": turns, "child": CHILD}))
    host.settings = dataclasses.replace(host.settings, auto_refine_every=1)
    parent = await host.attach(make_notebook("tree.ipynb"))

    ended = await run_turn(host, parent.session_id, "fan out")
    assert ended["final_text"] == "[('alpha', 'completed')]"
    child = next(a for a in host.agents.values() if a is not parent)
    assert host.runtime.refiners.auto(parent.session_id) is not None
    assert host.runtime.refiners.auto(child.session_id) is None
    assert host.runtime.refiners.get(child.session_id) is not None  # refine.run still works
    child_calls = [e for e in child.session.entries if e["type"] == "assistant_message"]
    assert len(child_calls) >= 1
    assert not [e for e in child.session.entries if e["type"] == "refine_review"]


# ------------------------------------------------------------------ the real SDKs

PLANNER_MARK = "You refine the continual harness"
SDK_PROPOSAL = {
    "summary": "remember the SDK",
    "edits": [{"action": "create", "kind": "memory", "title": "sdk fact", "content": "works"}],
}


def refine_policy(request: RecordedRequest) -> Reply:
    """The planner call (no tools, the planner's system prompt) gets a fenced proposal; the
    turn runs the cell that waits for the plan, then answers."""
    if "tools" not in request.body:
        if PLANNER_MARK in json.dumps(request.body):
            return Reply(text=fenced(SDK_PROPOSAL))
        return Reply(text='{"should_refine": false, "rationale": "no"}')
    if any("SCHEDULED True" in result for result in request.tool_results()):
        return Reply(text="done")
    return Reply.code(WAIT_UNTIL_PLANNED)


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(refine_policy) as server:
        yield server


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_a_planner_call_goes_through_each_vendors_sdk(
    vendor: str, tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    if vendor == "anthropic":
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_llm.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    run = HeadlessRun(
        cwd=tmp_path,
        notebook="analysis.ipynb",
        provider=vendor,
        model="fake-model",
        script_path=None,
        stream=True,
        kernel_name="python3",
        settings=Settings(cell_timeout=60),
        kernel_pool_size=0,
        harness_dir=str(tmp_path / "global-harness"),
    )
    await run.start(lambda event: None)
    try:
        outcome = await run.agent.run_turn("remember what works")
        store = run.runtime.harnesses.harness_for(run.agent.session_id).local
    finally:
        await run.close()

    assert outcome.final_text == "done", outcome
    assert store is not None and store.get("memory", "sdk_fact").content == "works"
    planner = [r for r in fake_llm.requests if PLANNER_MARK in json.dumps(r.body)]
    assert len(planner) == 1 and "tools" not in planner[0].body
    assert "<current_harness_state>" in json.dumps(planner[0].messages)
