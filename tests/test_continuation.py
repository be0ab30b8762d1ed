"""The continue-or-stop seam (core/continuation.py): a continuer keeps a turn going after an
answer without a cell, records what the model reads next, and the model-call count of
`max_iterations` starts again."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prime_agent_lab.core.agent import Agent, AgentHooks, TurnOutcome
from prime_agent_lab.core.continuation import Continuers
from prime_agent_lab.core.messages import ModelResponse
from prime_agent_lab.core.sessions import SessionRepository
from prime_agent_lab.core.settings import Settings

from .test_core import EchoKernel, ListProvider, MemoryNotebook, call


def _agent(tmp_path: Path, provider: ListProvider, continuers: Continuers, **config: int) -> Agent:
    session = SessionRepository(tmp_path).create(
        notebook_path="m.ipynb", provider="list", model="m"
    )
    return Agent(
        session,
        provider,
        MemoryNotebook(),
        EchoKernel(),
        Settings(**config),
        hooks=AgentHooks(should_continue=continuers),
    )


def test_a_continuer_keeps_the_turn_going_with_what_it_records(tmp_path: Path) -> None:
    asked: list[str] = []

    async def once(agent: Agent, outcome: TurnOutcome) -> bool:
        asked.append(outcome.final_text)
        if len(asked) > 1:
            return False
        agent.continue_with("[continuation] keep going", "goal", "Continuing: goal open.")
        return True

    continuers = Continuers()
    continuers.add("goal", once)
    provider = ListProvider([ModelResponse(text="first"), ModelResponse(text="second")])
    agent = _agent(tmp_path, provider, continuers)
    events: list[dict[str, object]] = []
    agent.events.add_listener(events.append)

    outcome = asyncio.run(agent.run_turn("go"))

    assert (outcome.stop_reason, outcome.final_text) == ("end_turn", "second")
    assert asked == ["first", "second"]
    assert provider.requests[1].messages[-1].text == "[continuation] keep going"
    kinds = [e["type"] for e in agent.session.path()]
    assert kinds == [
        "user_message",
        "assistant_message",
        "continuation",
        "assistant_message",
        "turn_end",
    ]
    shown = [e for e in events if e["type"] == "notice" and e["kind"] == "continuation"]
    assert [(e["text"], e["reason"]) for e in shown] == [("Continuing: goal open.", "goal")]


def test_the_model_call_limit_counts_again_after_a_continuation(tmp_path: Path) -> None:
    # max_iterations=2: two calls (a cell, an answer), continued, then two more.
    steps = [
        ModelResponse(tool_calls=[call("a", "c1")]),
        ModelResponse(text="first"),
        ModelResponse(tool_calls=[call("b", "c2")]),
        ModelResponse(text="second"),
    ]
    continued = []

    async def once(agent: Agent, outcome: TurnOutcome) -> bool:
        if continued:
            return False
        continued.append(outcome.turn)
        agent.continue_with("again", "autonomous", "Continuing.")
        return True

    continuers = Continuers()
    continuers.add("autonomous", once)
    agent = _agent(tmp_path, ListProvider(steps), continuers, max_iterations=2)
    outcome = asyncio.run(agent.run_turn("go"))
    assert (outcome.stop_reason, outcome.final_text) == ("end_turn", "second")


def test_continuers_are_asked_in_order_and_the_first_yes_wins(tmp_path: Path) -> None:
    order: list[str] = []

    def answering(name: str, answer: bool):  # type: ignore[no-untyped-def]
        async def decide(agent: Agent, outcome: TurnOutcome) -> bool:
            order.append(name)
            return answer and len(order) < 3

        return decide

    continuers = Continuers()
    continuers.add("goal", answering("goal", False))
    continuers.add("autonomous", answering("autonomous", True))
    agent = _agent(
        tmp_path, ListProvider([ModelResponse(text="a"), ModelResponse(text="b")]), continuers
    )
    asyncio.run(agent.run_turn("go"))
    assert order == ["goal", "autonomous", "goal", "autonomous"]
