"""The kernel clean-up after a compaction: planned in the background by one short model call,
applied at the next step boundary, only on the agent's own variables, recorded and told."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from prime_agent_lab.core.kernel_gc import agent_names, checked_actions, code_hash, parse_plan

from .test_compaction import RecordingProvider, filler, headless, printed, write_script

WAIT_FOR_PLAN = (
    "import asyncio\n"
    "while (await compact.status())['kernel_gc'] == 'planning':\n"
    "    await asyncio.sleep(0.02)\n"
    "print('PLAN', (await compact.status())['kernel_gc'])"
)
PLAN = {
    "actions": [
        {"name": "big", "action": "delete", "reason": "already reduced"},
        {"name": "scratch", "action": "summarize", "summary": "scratch held [1, 2, 3]"},
        {"name": "user_table", "action": "delete", "reason": "looks unused"},
        {"name": "nowhere", "action": "delete"},
        {"name": "keep", "action": "explode"},
    ]
}


async def test_after_a_compaction_the_agents_unneeded_variables_go_and_the_users_stay(
    tmp_path: Path,
) -> None:
    turns = [
        {"code": "big = 'b' * 5000\nscratch = [1, 2, 3]\nkeep = 42"},
        filler(0),
        filler(1),
        {"code": "print('RUN', await compact.run())"},
        {"code": WAIT_FOR_PLAN},
        {"code": "print('AFTER', 'big' in dir(), repr(scratch), keep, len(user_table))"},
        {"text": "finished"},
    ]
    reply = "Here is the plan:\n```json\n" + json.dumps(PLAN) + "\n```"
    data = {"turns": turns, "side": {"kernel_gc": [{"text": reply}]}}
    run = headless(
        tmp_path,
        write_script(tmp_path, data),
        context_window=100_000,
        compaction_keep_recent_tokens=500,
    )
    # `big` is over the snapshot cap, so the clean-up reports it too.
    run.runtime.settings = dataclasses.replace(run.runtime.settings, snapshot_variable_cap=4_000)
    events: list[Any] = []
    await run.start(events.append)
    recorder = RecordingProvider(run.agent.provider)
    run.agent.provider = recorder
    try:
        # The researcher's own cell, run before the agent's turn.
        user = await run.agent.kernel.execute("user_table = list(range(1000))", lambda e: None, 60)
        assert user.status == "ok"
        outcome = await run.settle(await run.agent.run_turn("go"))
    finally:
        await run.close()

    assert outcome.stop_reason == "end_turn", outcome
    session = run.agent.session
    assert printed(session, "PLAN") == "PLAN ready"
    assert printed(session, "AFTER") == "AFTER False 'scratch held [1, 2, 3]' 42 1000"
    (cleanup,) = [e for e in session.entries if e["type"] == "kernel_gc"]
    assert cleanup["deleted"] == ["big"]
    assert cleanup["summarized"] == ["scratch"]
    assert {o["name"] for o in cleanup["oversized"]} >= {"big", "user_table"}
    assert "deleted big" in cleanup["text"]
    # The review saw only the agent's variables, never the researcher's.
    (review,) = [r for r in recorder.requests if r.purpose == "kernel_gc"]
    listed = review.messages[0].text.split("<variables>")[1]
    assert "- big: str" in listed and "- keep: int" in listed
    assert "user_table" not in listed
    # The model is told, at its next call.
    later = [r for r in recorder.requests if r.purpose == "turn"][-1]
    assert any(m.text.startswith("[notice] Kernel clean-up") for m in later.messages)
    assert [e["kind"] for e in events if e["type"] == "notice"] == ["compacted", "kernel_gc"]


def test_the_plan_is_read_fenced_or_bare_and_a_cut_off_reply_is_reported() -> None:
    bare = '{"actions": [{"name": "a", "action": "delete"}]}'
    assert parse_plan(bare) == ([{"name": "a", "action": "delete"}], None)
    assert parse_plan(f"```json\n{bare}\n```")[0] == [{"name": "a", "action": "delete"}]
    assert parse_plan(f"Sure.\n{bare}\nDone.")[0] == [{"name": "a", "action": "delete"}]
    assert parse_plan('```json\n{"actions": [{"name": "a", "act') == (
        [],
        "the reply was cut off before its JSON ended (no closing fence)",
    )
    assert parse_plan('{"actions": [{"name": "a"', "max_tokens") == (
        [],
        "the reply was cut off before its JSON ended",
    )
    assert parse_plan("nothing to clean")[1] == "the reply holds no JSON object"
    assert parse_plan('{"names": []}')[1] == 'the reply has no "actions" list'


def test_only_names_last_set_by_agent_cells_are_candidates() -> None:
    agent_code = "x = 1"
    names = [
        {"name": "x", "id": 1, "set_by": {"code": code_hash(agent_code)}},
        {"name": "mine", "id": 2, "set_by": {"code": code_hash("mine = 2")}},
        {"name": "older", "id": 3, "set_by": None},
    ]
    candidates = agent_names(names, {code_hash(agent_code)})
    assert list(candidates) == ["x"]
    actions = checked_actions(
        [{"name": "x", "action": "delete"}, {"name": "mine", "action": "delete"}], candidates
    )
    assert [(a["name"], a["id"]) for a in actions] == [("x", 1)]
