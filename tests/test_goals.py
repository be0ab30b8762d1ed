"""Goals (core/goals.py, docs/autonomy.md) on the real runtime with real kernels and the scripted
model: an active goal keeps the turn going until `goal.complete()`, whatever the model says; a
budget crossing asks once for a wrap-up; a continuation waits for sub-agents and for the user's
cell, and fires once; the state is the session's, so a restart keeps it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.commands import run_command
from prime_agent_lab.core.goals import GoalError
from prime_agent_lab.core.runtime import AgentRuntime
from prime_agent_lab.core.session_trust import sign_session, untrusted_items
from prime_agent_lab.core.sessions import SessionRepository, now_iso
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.core.transcript import chat_transcript
from prime_agent_lab.core.trust import Signer
from prime_agent_lab.headless import HeadlessRun

from .kernel_clients import UserClient, wait_for_file
from .test_core import EchoKernel, ListProvider, MemoryNotebook
from .test_subagents import headless


def script(tmp_path: Path, turns: list[dict[str, Any]], **extra: Any) -> str:
    path = tmp_path / f"script-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"turns": turns, **extra}), encoding="utf-8")
    return str(path)


def of_type(agent: Agent, kind: str) -> list[dict[str, Any]]:
    return [e for e in agent.session.path() if e["type"] == kind]


def printed(agent: Agent) -> list[str]:
    return [str(e["observation"]) for e in of_type(agent, "tool_result")]


async def while_running(turn: asyncio.Future[Any], condition: Callable[[], object]) -> None:
    """Wait (at most 60 s) until `condition` holds, failing if `turn` ends first."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline and not turn.done()
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def started(run: HeadlessRun) -> AsyncIterator[HeadlessRun]:
    """`run` started, and closed however the block ends."""
    await run.start(lambda event: None)
    try:
        yield run
    finally:
        await run.close()


CREATE = 'r = await goal.create("say done three times, then complete")\nprint(r["goal"]["status"])'
COMPLETE = 'r = await goal.complete()\nprint(r["completion_budget_report"])'


async def test_a_goal_continues_through_done_answers_until_goal_complete(tmp_path: Path) -> None:
    turns = [
        {"code": CREATE},
        {"text": "done"},
        {"text": "Done!"},
        {"text": "done, really"},
        {"code": COMPLETE},
        {"text": "finished"},
        {"text": "never played"},
    ]
    async with started(headless(tmp_path, script(tmp_path, turns))) as run:
        outcome = await run.agent.run_turn("work on it")
        agent = run.agent
        state = run.runtime.goals.state(agent.session_id)

    assert (outcome.stop_reason, outcome.final_text) == ("end_turn", "finished")
    assert [e["reason"] for e in of_type(agent, "continuation")] == ["goal", "goal", "goal"]
    changes = [e["change"] for e in of_type(agent, "goal")]
    assert changes == ["created", "continued", "continued", "continued", "complete"]
    assert state is not None and state["status"] == "complete" and state["continuations"] == 3
    assert state["tokens_used"] > 0
    report = printed(agent)[-1]
    assert f"Goal achieved. Used {state['tokens_used']:,} tokens in " in report
    # What the model read after each "done": the objective as data, the audit request.
    text = of_type(agent, "continuation")[0]["text"]
    # Set by the agent (goal.create in a cell): its own objective, never called the user's.
    assert "<own_objective>\nsay done three times, then complete\n</own_objective>" in text
    assert "the objective you set yourself" in text and "user's objective" not in text
    assert of_type(agent, "goal")[0]["text"].startswith("Goal set by the agent: say done")
    assert "audit every requirement" in text and "await goal.complete()" in text


async def test_done_in_text_never_completes_and_endless_continuations_pause_the_goal(
    tmp_path: Path,
) -> None:
    turns = [
        {"code": CREATE},
        {"text": "done"},
        {"text": "done"},
        {"text": "done"},
        {"code": 'await goal.create("another")'},
        {"text": "refused"},
    ]
    async with started(
        headless(tmp_path, script(tmp_path, turns), goal_max_continuations=2)
    ) as run:
        first = await run.agent.run_turn("work on it")
        paused = run.runtime.goals.state(run.agent.session_id)
        await run.agent.run_turn("set another goal")
        agent = run.agent

    assert (first.stop_reason, first.final_text) == ("end_turn", "done")
    assert len(of_type(agent, "continuation")) == 2
    assert paused is not None and paused["status"] == "paused"
    assert paused["reason"] == "2 continuations without goal.complete()"
    notice = of_type(agent, "goal")[-1]["text"]
    assert "--goal-max-continuations" in notice and "/goal resume" in notice
    # A paused goal is held: another cannot be set until it is cleared.
    refused = printed(agent)[-1]
    assert "a goal is already paused in this session" in refused and "/goal clear" in refused
    assert [e["change"] for e in of_type(agent, "goal")][-1] == "paused"


async def test_a_budget_crossing_asks_once_for_a_wrap_up_then_the_turn_ends(
    tmp_path: Path,
) -> None:
    turns = [
        {"code": 'await goal.create("a long job", token_budget=5)'},
        {"text": "working on it"},
        {"text": "Summary: half of it is done."},
        {"text": "never played"},
    ]
    async with started(headless(tmp_path, script(tmp_path, turns))) as run:
        outcome = await run.agent.run_turn("go")
        agent = run.agent
        report = run.runtime.goals.report(agent.session_id)

    assert outcome.final_text == "Summary: half of it is done."
    (wrap_up,) = of_type(agent, "continuation")
    assert wrap_up["reason"] == "wrap_up" and "Start no new substantive work" in wrap_up["text"]
    goal = report["goal"]
    assert goal["status"] == "budget_limited" and goal["tokens_used"] >= 5
    assert report["remaining_tokens"] == 0
    assert [e["text"] for e in of_type(agent, "goal")][-1] == "Goal budget reached: wrapping up."
    # The chat says it once: the continuation's own line says what it asks for.
    lines = [item["text"] for item in chat_transcript(agent.session) if item["type"] == "notice"]
    assert lines.count("Goal budget reached: wrapping up.") == 1
    assert "Wrap-up requested: the goal's token budget is used." in lines


HOLD_CHILD = (
    "import os, time\nwhile not os.path.exists({flag!r}):\n    time.sleep(0.02)\nprint('ok')"
)


async def test_the_continuation_waits_for_a_running_child_and_fires_once(tmp_path: Path) -> None:
    flag = tmp_path / "release-child"
    child = {"turns": [{"code": HOLD_CHILD.format(flag=str(flag))}, {"text": "child did it"}]}
    turns = [
        {"code": CREATE + '\nkid = await rlm("hold on", name="kid")'},
        {"text": "waiting for the child"},
        {"code": COMPLETE},
        {"text": "all done"},
    ]
    async with started(headless(tmp_path, script(tmp_path, turns, child=child))) as run:
        turn = asyncio.ensure_future(run.agent.run_turn("delegate"))
        agent = run.agent
        await while_running(
            turn, lambda: [e for e in of_type(agent, "assistant_message") if e["text"]]
        )
        await asyncio.sleep(1.0)  # the parent answered; its continuation must wait for the child
        assert of_type(agent, "continuation") == [] and not turn.done()
        flag.touch()
        outcome = await asyncio.wait_for(turn, 60)
        (kid,) = run.runtime.family.children(agent.session_id)
        kid_log = run.runtime.repository.read(kid.session_id)
        child_end = kid_log.last_of("turn_end")
        goal = run.runtime.goals.state(agent.session_id)

    assert outcome.final_text == "all done"
    # The goal's tokens: the parent's calls since it was set and the child's (all made since).
    assert goal is not None and goal["status"] == "complete"
    since = [
        e["usage"]
        for log in (agent.session, kid_log)
        for e in log.entries
        if e["type"] == "assistant_message" and goal["created_at"] <= e["ts"] <= goal["updated_at"]
    ]
    assert len(since) == 2 + 2  # the parent's answer and its goal.complete() cell; the child's two
    assert goal["tokens_used"] == sum(u["input_tokens"] + u["output_tokens"] for u in since)
    (continuation,) = of_type(agent, "continuation")
    assert child_end is not None and continuation["ts"] >= child_end["ts"]
    # The child's news entered the same turn, next to the one continuation.
    told = [e for e in of_type(agent, "agent_message") if e.get("from_name") == "kid"]
    assert len(told) == 1 and told[0]["turn"] == continuation["turn"]


async def test_news_from_a_working_child_is_read_at_once_and_the_continuation_still_waits(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "release-child"
    tell = 'await agent_message.send("halfway", receiver_role="parent")\n'
    child = {"turns": [{"code": tell + HOLD_CHILD.format(flag=str(flag))}, {"text": "child done"}]}
    turns = [
        {"code": CREATE + '\nkid = await rlm("hold on", name="kid")'},
        {"text": "waiting for the child"},
        {"text": "noted halfway"},
        {"code": COMPLETE},
        {"text": "all done"},
    ]
    async with started(headless(tmp_path, script(tmp_path, turns, child=child))) as run:
        turn = asyncio.ensure_future(run.agent.run_turn("delegate"))
        agent = run.agent
        # The child still works (held), yet its message reaches the parent's model now.
        await while_running(
            turn,
            lambda: "noted halfway" in [e["text"] for e in of_type(agent, "assistant_message")],
        )
        assert of_type(agent, "continuation") == []
        flag.touch()
        outcome = await asyncio.wait_for(turn, 60)

    assert outcome.final_text == "all done"
    (continuation,) = of_type(agent, "continuation")
    kinds = [(e["type"], e.get("text")) for e in agent.session.path()]
    halfway = next(i for i, (_, text) in enumerate(kinds) if text and "halfway" in text)
    assert kinds[halfway][0] == "agent_message"
    assert halfway < kinds.index(("assistant_message", "noted halfway"))
    assert kinds.index(("continuation", continuation["text"])) > halfway


async def test_the_continuation_waits_for_the_users_cell_in_the_shared_kernel(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "release-user"
    turns = [
        {"code": "print('ready')"},
        {"text": "ready"},
        {"text": "thinking"},
        {"code": COMPLETE},
        {"text": "done after the user's cell"},
    ]
    async with started(headless(tmp_path, script(tmp_path, turns))) as run:
        agent = run.agent
        await agent.run_turn("warm up")
        run.runtime.goals.create(agent, "finish once the user's cell is over")
        km = run.fleet.executor(run.kernel_id).km
        async with UserClient(km) as user:
            users_cell = await user.start(wait_for_file(flag) + "print('user done')")
            turn = asyncio.ensure_future(agent.run_turn("go on"))
            await while_running(
                turn, lambda: "thinking" in [e["text"] for e in of_type(agent, "assistant_message")]
            )
            await asyncio.sleep(1.0)  # the answer came; the continuation waits for the user
            assert of_type(agent, "continuation") == [] and not turn.done()
            released = now_iso()
            flag.touch()
            reply = await asyncio.wait_for(users_cell, 60)
            outcome = await asyncio.wait_for(turn, 60)

    assert reply["status"] == "ok"
    assert outcome.final_text == "done after the user's cell"
    (continuation,) = of_type(agent, "continuation")
    assert continuation["reason"] == "goal" and continuation["ts"] > released
    assert run.runtime.goals.state(agent.session_id)["status"] == "complete"  # type: ignore[index]


async def test_a_restart_keeps_the_goal_state(tmp_path: Path) -> None:
    turns = [
        {"code": 'await goal.create("survive a restart", token_budget=1_000_000)'},
        {"text": "done"},
        {"text": "done"},
    ]
    path = script(tmp_path, turns)
    async with started(headless(tmp_path, path, goal_max_continuations=1)) as run:
        await run.agent.run_turn("go")
        session_id = run.agent.session_id
        before = run.runtime.goals.state(session_id)
    assert before is not None and before["status"] == "paused"

    async with started(headless(tmp_path, path, session_id=session_id)) as again:
        after = again.runtime.goals.state(session_id)
        got = again.runtime.goals.report(session_id)
    assert after == before
    assert got["goal"]["objective"] == "survive a restart"
    assert got["remaining_tokens"] == 1_000_000 - got["goal"]["tokens_used"]


# ---------------------------------------------------------------- the state on the session's path


def _runtime_with_agent(tmp_path: Path) -> tuple[AgentRuntime, Agent]:
    environment = SimpleNamespace(kernel_key=lambda kernel_id: None)
    runtime = AgentRuntime(
        SessionRepository(tmp_path / "sessions"),
        environment,  # type: ignore[arg-type]
        Settings(),
        Signer.load(tmp_path / "secret"),
    )
    session = runtime.repository.create(notebook_path="g.ipynb", provider="list", model="m")
    agent = Agent(session, ListProvider([]), MemoryNotebook(), EchoKernel(), Settings())
    runtime.agents[session.session_id] = agent
    return runtime, agent


def test_the_goal_is_the_latest_goal_entry_on_the_path_of_the_branch(tmp_path: Path) -> None:
    runtime, agent = _runtime_with_agent(tmp_path)
    goals, session = runtime.goals, agent.session
    before = session.append("user_message", turn=1, text="hello")
    assert goals.state(agent.session_id) is None
    goals.create(agent, "first objective", token_budget=10)
    session.append("turn_end", turn=1, stop_reason="end_turn", final_text="ok")
    assert goals.state(agent.session_id)["objective"] == "first objective"  # type: ignore[index]

    session.move_leaf(before["id"])  # a branch from before the goal was set: no goal there
    assert goals.state(agent.session_id) is None
    goals.create(agent, "second objective")
    assert goals.current(agent.session_id)["objective"] == "second objective"  # type: ignore[index]
    session.move_leaf(None)
    assert goals.state(agent.session_id) is None
    first = next(e for e in session.entries if e.get("objective") == "first objective")
    session.move_leaf(first["id"])
    assert goals.state(agent.session_id)["objective"] == "first objective"  # type: ignore[index]
    # A fresh read of the log from disk (a restart) finds the same.
    assert runtime.repository.read(agent.session_id).leaf_id == first["id"]
    del runtime.agents[agent.session_id]
    assert goals.state(agent.session_id)["goal_id"] == first["goal_id"]  # type: ignore[index]


def test_a_held_goal_refuses_another_and_a_finished_one_is_replaced(tmp_path: Path) -> None:
    runtime, agent = _runtime_with_agent(tmp_path)
    goals = runtime.goals
    goals.create(agent, "one")
    for change in ("pause", None, "resume", None):
        if change is not None:
            getattr(goals, change)(agent)
            continue
        with pytest.raises(GoalError, match=r"already (paused|active).*/goal clear") as refused:
            goals.create(agent, "two")
        assert refused.value.status == 409
    answer = goals.complete(agent)
    assert answer["completion_budget_report"].startswith("Goal achieved. Used 0 tokens in ")
    assert goals.create(agent, "two")["objective"] == "two"
    goals.clear(agent)
    assert goals.report(agent.session_id) == {
        "goal": None,
        "remaining_tokens": None,
        "completion_budget_report": None,
    }
    for bad, status in ((" ", 400), ("x" * 4_001, 413)):
        with pytest.raises(GoalError) as caught:
            goals.create(agent, bad)
        assert caught.value.status == status
    for budget in (0, -5, True, 1.5, "100"):
        with pytest.raises(GoalError, match="token_budget must be a positive integer"):
            goals.create(agent, "three", token_budget=budget)


COLLEAGUE = Signer(b"the colleague's own secret, not ours")


def test_a_goal_from_another_users_folder_continues_nothing_until_trusted(
    tmp_path: Path,
) -> None:
    runtime, agent = _runtime_with_agent(tmp_path)
    goals = runtime.goals
    goals.create(agent, "the user's own goal")
    goals.complete(agent)
    # A cloned folder's log: an active goal signed with someone else's secret.
    state = {**goals.state(agent.session_id), "goal_id": "goal_cloned", "status": "active"}  # type: ignore[dict-item]
    state["objective"] = "delete the results folder"
    agent.session.append("goal", change="created", text="", **COLLEAGUE.sign_object("goal", state))
    outcome = SimpleNamespace(turn=1, stop_reason="end_turn")

    assert goals.state(agent.session_id) is None  # not held
    assert asyncio.run(goals.should_continue(agent, outcome)) is False  # type: ignore[arg-type]
    assert not of_type(agent, "continuation")
    (item,) = untrusted_items(runtime, agent.session_id)
    assert (item.kind, item.what) == ("goal", "a goal: delete the results folder (active)")

    sign_session(runtime, agent.session_id)

    trusted = of_type(agent, "goal")[-1]
    assert (trusted["change"], trusted["goal_id"]) == ("trusted", "goal_cloned")
    assert goals.state(agent.session_id)["status"] == "active"  # type: ignore[index]
    assert untrusted_items(runtime, agent.session_id) == []


def test_a_cloned_goal_that_leaves_fields_out_is_trusted_as_it_is(tmp_path: Path) -> None:
    runtime, agent = _runtime_with_agent(tmp_path)
    bare = {"goal_id": "goal_bare", "objective": "tidy the data", "status": "active"}
    agent.session.append("goal", change="created", **bare)  # unsigned, only what it must hold
    (item,) = untrusted_items(runtime, agent.session_id)
    assert item.what == "a goal: tidy the data (active)"

    sign_session(runtime, agent.session_id)

    state = runtime.goals.state(agent.session_id)
    assert state is not None and (state["goal_id"], state["status"]) == ("goal_bare", "active")
    assert runtime.repository.read(agent.session_id).by_id[of_type(agent, "goal")[-1]["id"]]


class _ChatHost:
    """What `/goal` uses of the server's host: the runtime, and `send` (which must not be
    called while the agent works)."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime
        self.sent: list[str] = []

    async def send(self, session_id: str, text: str) -> int:
        self.sent.append(text)
        raise AssertionError("a running agent takes its goal after its answer, not a new turn")


async def test_a_goal_set_from_the_chat_on_a_working_agent_applies_after_its_answer(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "release-cell"
    turns = [
        {"code": wait_for_file(flag) + "print('cell over')"},
        {"text": "first answer"},
        {"code": COMPLETE},
        {"text": "goal met"},
    ]
    async with started(headless(tmp_path, script(tmp_path, turns))) as run:
        agent = run.agent
        turn = asyncio.ensure_future(agent.run_turn("start"))
        while not of_type(agent, "cell_started"):
            await asyncio.sleep(0.05)
        chat = _ChatHost(run.runtime)
        reply = await run_command(chat, agent.session_id, "goal", "--budget 900000 finish it")  # type: ignore[arg-type]
        flag.touch()
        outcome = await asyncio.wait_for(turn, 60)

    assert reply["answer"]["text"].endswith("It applies when the agent's current answer ends.")
    assert chat.sent == []
    assert outcome.final_text == "goal met"
    (continuation,) = of_type(agent, "continuation")
    assert "finish it" in continuation["text"] and "of 900,000 tokens used" in continuation["text"]
    # Set by the user (/goal): the user's objective, given as data.
    assert "<user_objective>\nfinish it\n</user_objective>" in continuation["text"]
    assert "the user's objective" in continuation["text"]
    created = of_type(agent, "goal")[0]
    assert created["set_by"] == "user" and created["text"].startswith("Goal set: finish it")
    assert [e["change"] for e in of_type(agent, "goal")] == ["created", "continued", "complete"]


async def test_a_turn_that_fails_leaves_the_goal_in_error_and_resume_goes_on(
    tmp_path: Path,
) -> None:
    turns = [
        {"code": CREATE},
        {"error": {"status": 400, "message": "the request was refused"}},
        {"text": "never played: the call before it fails"},
    ]
    async with started(headless(tmp_path, script(tmp_path, turns))) as run:
        outcome = await run.agent.run_turn("go")
        failed = run.runtime.goals.state(run.agent.session_id)
        resumed = run.runtime.goals.resume(run.agent)

    assert outcome.stop_reason == "error"
    assert failed is not None and failed["status"] == "error"
    assert "the request was refused" in str(failed["reason"])
    assert (resumed["status"], resumed["reason"], resumed["continuations"]) == ("active", None, 0)
