"""Refine end to end (headless, real kernels, scripted planner via the script's `side` section):
planning in the background, applying at the turn boundary, the records, rollback, auto-refine."""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.harness.refine_plan import CUT_OFF
from prime_agent_lab.core.harness.store import HarnessStore
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.headless import HeadlessRun

CONTRACT = {"type": "python", "import": "statistics", "callable": "mean"}
WAIT_UNTIL_PLANNED = (
    "import asyncio\n"
    "answer = await refine.run('remember the retry pattern')\n"
    "while not (await refine.status()).waiting_to_apply:\n"
    "    await asyncio.sleep(0.02)\n"
    "print('SCHEDULED', answer.scheduled)"
)
PROPOSAL = {
    "summary": "remember the retry pattern",
    "rationale": "the test failed twice before it passed",
    "expectedOutcome": "no wasted runs",
    "edits": [
        {
            "action": "create",
            "kind": "memory",
            "title": "flaky test",
            "content": "retry 3x",
            "reason": "two failures, then a pass",
        },
        {"action": "update", "kind": "prompt", "id": "base_system_prompt", "content": "obey"},
        {"action": "create", "kind": "lesson", "title": "t", "content": "c"},
        {"action": "create", "kind": "skill", "title": "mean", "content": "average"},
        {
            "action": "create",
            "kind": "skill",
            "title": "average",
            "content": "Mean of data.",
            "reference": CONTRACT,
            "arguments": {"data": "list[float]"},
        },
    ],
}


def fenced(value: Any) -> str:
    return f"Here is the plan:\n```json\n{json.dumps(value, indent=2)}\n```\n"


def write_script(tmp_path: Path, turns: list[dict[str, Any]], side: dict[str, Any]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns, "side": side}), encoding="utf-8")
    return str(path)


@asynccontextmanager
async def started(
    tmp_path: Path, turns: list[dict[str, Any]], side: dict[str, Any], **settings: Any
) -> AsyncIterator[tuple[HeadlessRun, list[dict[str, Any]]]]:
    """A headless run of a script (turns, side); its events are collected."""
    run = HeadlessRun(
        cwd=tmp_path,
        notebook="analysis.ipynb",
        provider="scripted",
        model=None,
        script_path=write_script(tmp_path, turns, side),
        stream=False,
        kernel_name="python3",
        settings=Settings(cell_timeout=60, **settings.pop("config", {})),
        kernel_pool_size=0,
        harness_dir=str(tmp_path / "global-harness"),
        **settings,
    )
    events: list[dict[str, Any]] = []
    await run.start(events.append)
    try:
        yield run, events
    finally:
        await run.close()


def local_store(run: HeadlessRun) -> HarnessStore:
    store = run.runtime.harnesses.harness_for(run.agent.session_id).local
    assert store is not None
    return store


def refinements(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "refinement"]


async def next_refinement(events: list[dict[str, Any]], count: int) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while len(refinements(events)) < count:
            await asyncio.sleep(0.02)
    return refinements(events)[count - 1]


async def test_refine_run_plans_in_the_background_and_applies_at_the_next_model_call(
    tmp_path: Path,
) -> None:
    turns = [{"code": WAIT_UNTIL_PLANNED}, {"text": "done"}]
    async with started(tmp_path, turns, {"refine": [{"text": fenced(PROPOSAL)}]}) as (run, events):
        outcome = await run.agent.run_turn("go")
        assert outcome.final_text == "done", outcome

        event = await next_refinement(events, 1)
        record = event["refinement"]
        assert event["turn"] == 1  # applied inside the turn, before its second model call
        assert record["trigger"] == "agent" and record["scope"] == "local"
        assert record["expected_outcome"] == "no wasted runs"
        assert [e["applied"] for e in record["edits"]] == [True, False, False, False, True]
        assert [e["id"] for e in record["edits"]] == [
            "flaky_test",
            "base_system_prompt",
            "t",
            "mean",
            "average",
        ]
        errors = [e["error"] for e in record["edits"]]
        assert "base system prompt is not editable" in errors[1]
        assert "unsupported kind 'lesson'" in errors[2]
        assert "call contract" in errors[3]
        assert record["edits"][0]["reason"] == "two failures, then a pass"
        assert record["edits"][0]["after"]["content"] == "retry 3x"

        store = local_store(run)
        assert store.get("memory", "flaky_test").content == "retry 3x"
        assert store.get("skill", "average").reference == CONTRACT
        assert [r["id"] for r in store.refinements()] == [record["id"]]
        assert record["harness_version"]["local"] == store.revision()

        # The record is in the session log before the second model call, which read its note.
        types = [e["type"] for e in run.agent.session.entries]
        assert types.index("refinement") < len(types) - 1 - types[::-1].index("assistant_message")
        notes = [m.text for m in run.agent.session.context_messages() if "[refinement" in m.text]
        assert len(notes) == 1
        assert "Applied: create memory flaky_test" in notes[0]
        assert "Rejected: update prompt base_system_prompt (the base system prompt" in notes[0]
        # and the assistant message after it names the harness version its prompt was built from
        last = [e for e in run.agent.session.entries if e["type"] == "assistant_message"][-1]
        assert last["harness"]["local"] == store.revision()


async def test_planning_does_not_block_a_turn_and_applies_at_once_when_idle(tmp_path: Path) -> None:
    release = tmp_path / "release-planner"
    side = {"refine": [{"text": json.dumps(PROPOSAL), "wait_for": str(release)}]}
    async with started(tmp_path, [{"text": "answered"}], side) as (run, events):
        refiner = run.runtime.refiners.get(run.agent.session_id)
        assert refiner.schedule("look for patterns")["scheduled"] is True

        outcome = await run.agent.run_turn("a question while the planner thinks")
        assert outcome.final_text == "answered"
        assert refiner.status()["in_flight"] is True  # the turn ended with the planner pending
        assert not refinements(events)

        release.touch()
        event = await next_refinement(events, 1)
        assert "turn" not in event  # the agent was idle: applied at once
        assert local_store(run).get("memory", "flaky_test") is not None
        assert refiner.status() == {
            "pending": 0,
            "in_flight": False,
            "waiting_to_apply": False,
            "queued_rollbacks": [],
            "queued_deletes": [],
        }
        # The model reads the note with the next message.
        await run.agent.run_turn("and now?")
        messages = run.agent.session.context_messages()
        (note,) = [m for m in messages if "[refinement" in m.text]
        assert note.role == "user" and note.text.endswith("and now?")
        assert event["text"] in note.text


async def test_an_entry_changed_between_plan_and_apply_survives(tmp_path: Path) -> None:
    release = tmp_path / "release-planner"
    proposal = {"edits": [{"action": "update", "kind": "memory", "id": "fact", "content": "B"}]}
    side = {"refine": [{"text": json.dumps(proposal), "wait_for": str(release)}]}
    async with started(tmp_path, [{"text": "ok"}], side) as (run, events):
        store = local_store(run)
        store.create("memory", {"title": "fact", "content": "A"})
        run.runtime.refiners.get(run.agent.session_id).schedule(None)
        async with asyncio.timeout(30):
            while run.runtime.refiners.get(run.agent.session_id).status()["in_flight"] is False:
                await asyncio.sleep(0.02)
        store.update("memory", "fact", {"content": "another writer's"})  # while the plan runs
        release.touch()
        (edit,) = (await next_refinement(events, 1))["refinement"]["edits"]
        assert edit["applied"] is False and "changed during planning" in edit["error"]
        assert store.get("memory", "fact").content == "another writer's"


async def test_a_cut_off_planner_reply_is_recorded_as_cut_off_with_no_edits(tmp_path: Path) -> None:
    cut = json.dumps(PROPOSAL)[:60]
    side = {"refine": [{"text": cut, "stop_reason": "max_tokens"}]}
    async with started(tmp_path, [{"text": "ok"}], side) as (run, events):
        run.runtime.refiners.get(run.agent.session_id).schedule(None)
        record = (await next_refinement(events, 1))["refinement"]
        assert record["error"] == CUT_OFF
        assert record["edits"] == []
        assert local_store(run).refinements()[-1]["error"] == CUT_OFF
        assert "cut off (output budget exhausted)" in refinements(events)[0]["text"]


async def test_a_failed_planner_call_is_recorded_with_its_error(tmp_path: Path) -> None:
    side = {"refine": [{"error": {"status": 400, "message": "bad request"}}]}
    async with started(tmp_path, [{"text": "ok"}], side) as (run, events):
        run.runtime.refiners.get(run.agent.session_id).schedule(None)
        record = (await next_refinement(events, 1))["refinement"]
        assert record["error"].startswith("the planner call failed")
        assert record["edits"] == []


async def test_rollback_restores_the_exact_content_with_versions_still_rising(
    tmp_path: Path,
) -> None:
    proposal = {
        "edits": [
            {
                "action": "update",
                "kind": "memory",
                "id": "fact",
                "content": "refined",
                "metadata": {"source_turn": 3},
            },
            {"action": "delete", "kind": "prompt", "id": "units"},
            {"action": "create", "kind": "memory", "title": "new", "content": "added"},
        ]
    }
    async with started(
        tmp_path, [{"text": "ok"}], {"refine": [{"text": json.dumps(proposal)}]}
    ) as (run, events):
        store = local_store(run)
        store.create("memory", {"title": "fact", "content": "original", "path": "facts"})
        store.create("prompt", {"title": "units", "content": "metres", "metadata": {"n": 1}})
        original = {e.id: e.to_dict() for e in store.list()}
        refiner = run.runtime.refiners.get(run.agent.session_id)
        refiner.schedule(None)
        record = (await next_refinement(events, 1))["refinement"]
        assert all(e["applied"] for e in record["edits"])

        answer = await refiner.rollback(record["id"])
        assert answer["applied"] is True and answer["note"] == "applied"
        rollback = answer["refinement"]
        assert rollback["rollback_of"] == record["id"] and rollback["trigger"] == "rollback"
        assert [e["action"] for e in rollback["edits"]] == ["delete", "create", "update"]
        fields = ("title", "content", "path", "reference", "arguments", "metadata", "created_at")
        for entry_id, before in original.items():
            now = store.get(before["kind"], entry_id).to_dict()
            assert {f: now[f] for f in fields} == {f: before[f] for f in fields}
        assert store.get("memory", "fact").version == 3  # 1 created, 2 refined, 3 rolled back
        assert store.get("memory", "new") is None
        assert [r.get("rollback_of") for r in refiner.history()] == [None, record["id"]]
        with pytest.raises(Exception, match="already rolled back"):
            await refiner.rollback(record["id"])


async def test_a_rollback_says_in_words_which_refinement_it_undid(tmp_path: Path) -> None:
    """The chat names a rollback by the undone refinement's summary and time, not its id."""
    proposal = {
        "summary": "Remember the units",
        "edits": [{"action": "create", "kind": "memory", "title": "units", "content": "metres"}],
    }
    async with started(
        tmp_path, [{"text": "ok"}], {"refine": [{"text": json.dumps(proposal)}]}
    ) as (run, events):
        refiner = run.runtime.refiners.get(run.agent.session_id)
        refiner.schedule(None)
        record = (await next_refinement(events, 1))["refinement"]
        rollback = (await refiner.rollback(record["id"]))["refinement"]
        undone = {"summary": "Remember the units", "created_at": record["created_at"]}
        assert rollback["rolled_back"] == undone
        assert (await next_refinement(events, 2))["refinement"]["rolled_back"] == undone
        assert [e["before"]["title"] for e in rollback["edits"]] == ["units"]


async def test_the_kernel_sees_history_with_attributes_and_a_rollback_is_queued_mid_turn(
    tmp_path: Path,
) -> None:
    proposal = {
        "summary": "add a fact",
        "edits": [{"action": "create", "kind": "memory", "title": "fact", "content": "c"}],
    }
    turns = [
        {"code": WAIT_UNTIL_PLANNED},
        {
            "code": "h = await refine.history()\n"
            "e = h[-1].edits[0]\n"
            "print('HISTORY', len(h), h[-1].summary, e.action, e.kind, e.id, e.applied, "
            "e.before, e.after['content'])\n"
            "r = await refine.rollback(h[-1].id)\n"
            "print('ROLLBACK', r.queued, r.note)"
        },
        {"text": "done"},
    ]
    async with started(tmp_path, turns, {"refine": [{"text": json.dumps(proposal)}]}) as (
        run,
        events,
    ):
        await run.agent.run_turn("go")
        outputs = [str(e.get("observation", "")) for e in run.agent.session.entries]
        assert any("HISTORY 1 add a fact create memory fact True None c" in o for o in outputs)
        assert any("ROLLBACK True queued: applies at the next turn boundary" in o for o in outputs)
        rollback = (await next_refinement(events, 2))["refinement"]
        assert rollback["rollback_of"] == refinements(events)[0]["refinement"]["id"]
        assert refinements(events)[1]["turn"] == 1  # applied at that turn's next boundary
        assert local_store(run).get("memory", "fact") is None


@pytest.mark.parametrize(("cooldown_minutes", "reviews"), [(20.0, 1), (0.0, 2)])
async def test_auto_refine_reviews_when_a_turn_passed_n_calls_at_most_once_per_cooldown(
    tmp_path: Path, cooldown_minutes: float, reviews: int
) -> None:
    calls = [{"code": f"print({n})"} for n in range(3)]
    turns = [*calls, {"text": "first"}, *calls, {"text": "second"}]
    approve = '{"should_refine": true, "rationale": "a pattern", "instructions": "x"}'
    side = {
        "refine_review": [{"text": approve}, {"text": '{"should_refine": false}'}],
        "refine": [{"text": json.dumps({"summary": "nothing clear", "edits": []})}],
    }
    async with started(tmp_path, turns, side, auto_refine_every=3) as (run, events):
        run.runtime.settings = dataclasses.replace(
            run.runtime.settings, auto_refine_cooldown_minutes=cooldown_minutes
        )
        auto = run.runtime.refiners.auto(run.agent.session_id)
        assert (await run.agent.run_turn("one")).final_text == "first"
        record = (await next_refinement(events, 1))["refinement"]
        assert record["trigger"] == "auto:turns"
        assert "prefer an empty edits list" in record["instructions"]
        assert "The review suggests: x" in record["instructions"]
        assert (await run.agent.run_turn("two")).final_text == "second"
        async with asyncio.timeout(30):
            while auto.reviewing:
                await asyncio.sleep(0.02)
        logged = [e for e in run.agent.session.entries if e["type"] == "refine_review"]
        assert [e["should_refine"] for e in logged] == [True, False][:reviews]
        assert auto.reviews == reviews


async def test_auto_refine_off_never_reviews(tmp_path: Path) -> None:
    turns = [{"code": f"print({n})"} for n in range(4)] + [{"text": "done"}]
    async with started(tmp_path, turns, {}, auto_refine_every=0) as (run, _events):
        await run.agent.run_turn("go")
        assert run.runtime.refiners.auto(run.agent.session_id).reviews == 0


async def test_auto_refine_reviews_after_a_compaction(tmp_path: Path) -> None:
    turns = [
        {"code": 'print("x" * 3000)'},
        {"code": 'print("y" * 3000)'},
        {"code": "print(await compact.run())"},
        {"code": "print('after')"},
        {"text": "done"},
    ]
    side = {"refine_review": [{"text": '```json\n{"shouldRefine": false, "rationale": "no"}\n```'}]}
    async with started(
        tmp_path,
        turns,
        side,
        auto_refine_every=1000,
        config={"context_window": 100_000, "compaction_keep_recent_tokens": 500},
    ) as (run, events):
        await run.agent.run_turn("go")
        auto = run.runtime.refiners.auto(run.agent.session_id)
        async with asyncio.timeout(30):
            while auto.reviews < 1:
                await asyncio.sleep(0.02)
        (review,) = [e for e in run.agent.session.entries if e["type"] == "refine_review"]
        assert review["trigger"] == "auto:compaction" and review["should_refine"] is False
        assert not refinements(events)


async def test_a_users_delete_is_recorded_as_a_refinement_and_rolls_back(tmp_path: Path) -> None:
    async with started(tmp_path, [{"text": "ok"}], {}) as (run, events):
        store = local_store(run)
        store.create("memory", {"title": "fact", "content": "keep me", "metadata": {"n": 1}})
        before = store.get("memory", "fact").to_dict()
        refiner = run.runtime.refiners.get(run.agent.session_id)
        answer = await refiner.delete("memory", "fact")
        assert answer["applied"] is True and answer["refinement"]["trigger"] == "delete"
        assert store.get("memory", "fact") is None
        with pytest.raises(Exception, match="no memory 'fact'"):
            await refiner.delete("memory", "fact")
        await refiner.rollback(answer["refinement"]["id"])
        back = store.get("memory", "fact").to_dict()
        assert {k: back[k] for k in ("content", "metadata")} == {
            "content": "keep me",
            "metadata": {"n": 1},
        }
        assert back["version"] == before["version"] + 1
        assert [e["refinement"]["trigger"] for e in refinements(events)] == ["delete", "rollback"]


async def test_closing_while_an_apply_writes_the_store_still_records_the_refinement(
    tmp_path: Path,
) -> None:
    """The store write of an apply runs in a thread a cancel cannot stop: closing the agent
    then (a headless run ending) must not leave applied edits without their record."""
    proposal = {"edits": [{"action": "create", "kind": "memory", "title": "kept", "content": "c"}]}
    side = {"refine": [{"text": json.dumps(proposal)}]}
    async with started(tmp_path, [{"text": "ok"}], side) as (run, _events):
        store = local_store(run)
        refiner = run.runtime.refiners.get(run.agent.session_id)
        store.directory.mkdir(parents=True, exist_ok=True)
        with open(store.directory / ".lock", "a+b") as held:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # the apply's write waits for this
            refiner.schedule(None)
            async with asyncio.timeout(30):
                while not refiner._apply_lock.locked():
                    await asyncio.sleep(0.02)
            closing = asyncio.ensure_future(refiner.close())
            await asyncio.sleep(0)  # close() has cancelled its tasks and awaits them
            fcntl.flock(held.fileno(), fcntl.LOCK_UN)
        await closing
        async with asyncio.timeout(30):
            while store.get("memory", "kept") is None:
                await asyncio.sleep(0.02)
        records = store.refinements()
        assert [e["id"] for r in records for e in r["edits"] if e["applied"]] == ["kept"]


@pytest.mark.parametrize("asked", ["rollback", "delete"])
async def test_an_operation_asked_while_another_apply_runs_answers_with_its_own_record(
    tmp_path: Path, asked: str
) -> None:
    """A rollback or delete asked for while an apply holds the lock can be applied by that
    apply (it takes every queued operation): the answer must still be this operation's record
    (CI on b13f01d: the rollback answered 500, its record having gone to the other apply)."""
    proposal = {"edits": [{"action": "create", "kind": "memory", "title": "kept", "content": "c"}]}
    side = {"refine": [{"text": json.dumps(proposal)}]}
    async with started(tmp_path, [{"text": "ok"}], side) as (run, events):
        store = local_store(run)
        refiner = run.runtime.refiners.get(run.agent.session_id)
        store.create("memory", {"title": "fact", "content": "keep me"})
        deleted = (await refiner.delete("memory", "fact"))["refinement"]
        store.create("memory", {"title": "other", "content": "delete me"})
        with open(store.directory / ".lock", "a+b") as held:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # the planned apply's write waits here
            refiner.schedule(None)
            async with asyncio.timeout(30):
                while not refiner._apply_lock.locked():
                    await asyncio.sleep(0.02)
            if asked == "rollback":
                asking = asyncio.ensure_future(refiner.rollback(deleted["id"]))
            else:
                asking = asyncio.ensure_future(refiner.delete("memory", "other"))
            async with asyncio.timeout(30):
                while not refiner._rollbacks:
                    await asyncio.sleep(0.02)
            fcntl.flock(held.fileno(), fcntl.LOCK_UN)
        async with asyncio.timeout(30):
            answer = await asking
        mine = answer["refinement"]
        assert answer["applied"] is True and mine["trigger"] == asked
        if asked == "rollback":
            assert mine["rollback_of"] == deleted["id"]
            assert store.get("memory", "fact") is not None
        else:
            assert mine["edits"][0]["id"] == "other" and store.get("memory", "other") is None
        triggers = [e["refinement"]["trigger"] for e in refinements(events)]
        assert triggers == ["delete", "user", asked]
