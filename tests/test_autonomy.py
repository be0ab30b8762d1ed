"""The `autonomous` continuer and its budgets in the loop itself (core/autonomy.py), with an
in-memory agent: a budget stops the turn at a model-call boundary, a completed goal ends the run,
and a run without gates is kept going by the continuation prompt."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prime_agent_lab.core.agent import Agent, AgentHooks
from prime_agent_lab.core.autonomy import Autonomy
from prime_agent_lab.core.autonomy_config import Budgets
from prime_agent_lab.core.autonomy_texts import CONTINUATION_PROMPT
from prime_agent_lab.core.continuation import Continuers
from prime_agent_lab.core.entry_types import DECLARED
from prime_agent_lab.core.messages import ModelResponse, Usage
from prime_agent_lab.core.runtime import AgentRuntime
from prime_agent_lab.core.sessions import SessionLog, SessionRepository
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.core.stop_cause import USER_STOP, StopCause
from prime_agent_lab.core.trust import Signer
from prime_agent_lab.core.usage import session_usage

from .test_core import EchoKernel, ListProvider, MemoryNotebook, call


class _Runtime:
    """What `Autonomy` asks of the runtime, for one agent without sub-agents."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.continuers = Continuers()
        self.family = SimpleNamespace(
            member=lambda session_id: None, children=lambda session_id, deleted=False: []
        )
        self.mailbox = SimpleNamespace(deliveries=list, entering_turn=lambda session_id: False)
        self.agents: dict[str, Agent] = {}
        self._background: set[asyncio.Future[Any]] = set()

    def session_of(self, session_id: str) -> SessionLog | None:
        agent = self.agents.get(session_id)
        return agent.session if agent is not None else None

    def tree_usage(self, session_id: str) -> dict[str, int]:
        session = self.session_of(session_id)
        return session_usage(session) if session is not None else {}

    def descendants(self, session_id: str) -> list[str]:
        return []

    def spawn(self, awaitable: Any) -> None:
        task = asyncio.ensure_future(awaitable)
        self._background.add(task)

    async def stop_subtree(
        self, session_id: str, cause: StopCause = USER_STOP, *, with_root: bool = True
    ) -> list[str]:
        agent = self.agents.get(session_id)
        stopped = with_root and agent is not None and await agent.stop(cause)
        return [session_id] if stopped else []


def _autonomous_agent(
    tmp_path: Path, steps: list[ModelResponse], **budgets: Any
) -> tuple[Agent, Autonomy, _Runtime]:
    settings = Settings()
    runtime = _Runtime(settings)
    autonomy = Autonomy(runtime)  # type: ignore[arg-type]
    session = SessionRepository(tmp_path).create(
        notebook_path="m.ipynb", provider="list", model="m"
    )
    hooks = AgentHooks(should_continue=runtime.continuers, before_model_call=autonomy.at_model_call)
    agent = Agent(
        session, ListProvider(steps), MemoryNotebook(), EchoKernel(), settings, hooks=hooks
    )
    runtime.agents[agent.session_id] = agent
    autonomy.root = tmp_path
    defaults = Budgets.of(settings)
    chosen = Budgets(**{**defaults.wire(), **budgets})
    autonomy.configure(agent, True, chosen, [], persist=False)
    return agent, autonomy, runtime


def test_the_turn_budget_stops_the_turn_at_the_next_model_call(tmp_path: Path) -> None:
    steps = [ModelResponse(tool_calls=[call("x = 1", f"c{i}")]) for i in range(10)]
    agent, autonomy, _ = _autonomous_agent(tmp_path, steps, max_turns=2)
    outcome = asyncio.run(agent.run_turn("go"))
    assert outcome.stop_reason == "stopped"
    assert outcome.error == (
        "The autonomous run used its budget of 2 model calls, which stopped the turn"
    )
    run = autonomy.run(agent.session_id)
    assert run is not None and (run.reason, run.ended) == ("max_turns", True)
    assert [e["type"] for e in agent.session.path()].count("assistant_message") == 2


def test_the_token_budget_counts_cache_writes_but_not_cache_reads(tmp_path: Path) -> None:
    heavy = Usage(
        input_tokens=10, output_tokens=10, cache_read_tokens=10_000, cache_write_tokens=500
    )
    steps = [ModelResponse(tool_calls=[call("x = 1", f"c{i}")], usage=heavy) for i in range(10)]
    agent, autonomy, _ = _autonomous_agent(tmp_path, steps, max_tokens=1_000)
    asyncio.run(agent.run_turn("go"))
    run = autonomy.run(agent.session_id)
    assert run is not None and run.reason == "max_tokens"
    assert autonomy.state(agent.session_id)["run"]["tokens"] == 2 * 520  # type: ignore[index]


def test_without_gates_the_continuation_prompt_keeps_it_going_then_it_ends(
    tmp_path: Path,
) -> None:
    steps = [ModelResponse(text=f"done {i}") for i in range(3)]
    agent, autonomy, _ = _autonomous_agent(tmp_path, steps, continuations=2)
    outcome = asyncio.run(agent.run_turn("go"))
    assert (outcome.stop_reason, outcome.final_text) == ("end_turn", "done 2")
    continuations = [e for e in agent.session.path() if e["type"] == "continuation"]
    assert [c["text"] for c in continuations] == [CONTINUATION_PROMPT] * 2
    run = autonomy.run(agent.session_id)
    assert run is not None and (run.reason, run.continuations) == ("continuations_used", 2)


def test_a_goal_completed_in_the_run_ends_it_goal_complete(tmp_path: Path) -> None:
    steps = [ModelResponse(tool_calls=[call("await goal.complete()")]), ModelResponse(text="ok")]
    agent, autonomy, _ = _autonomous_agent(tmp_path, steps)
    completed = {**DECLARED["goal"].example, "change": "complete", "status": "complete"}

    class CompletingKernel(EchoKernel):
        async def execute(self, code: str, *args: Any, **kwargs: Any) -> Any:
            agent.session.append("goal", **completed)  # what goal.complete() records
            return await super().execute(code, *args, **kwargs)

    agent.kernel = CompletingKernel()
    outcome = asyncio.run(agent.run_turn("go"))
    assert outcome.stop_reason == "end_turn"
    run = autonomy.run(agent.session_id)
    assert run is not None and run.reason == "goal_complete"
    assert not [e for e in agent.session.path() if e["type"] == "continuation"]


def test_a_goal_completed_before_the_run_does_not_end_it(tmp_path: Path) -> None:
    agent, autonomy, _ = _autonomous_agent(tmp_path, [ModelResponse(text="a")] * 5, continuations=1)
    agent.session.append("goal", **{**DECLARED["goal"].example, "change": "complete"})
    asyncio.run(agent.run_turn("go"))
    run = autonomy.run(agent.session_id)
    assert run is not None and run.reason == "continuations_used"


def test_an_agent_loaded_again_still_has_its_runs_ended(tmp_path: Path) -> None:
    agent, autonomy, runtime = _autonomous_agent(tmp_path, [ModelResponse(text="one")] * 4)
    asyncio.run(agent.run_turn("go"))
    hooks = AgentHooks(should_continue=runtime.continuers, before_model_call=autonomy.at_model_call)
    provider = ListProvider([ModelResponse(text="two")] * 4)
    again = Agent(  # the same session, loaded again (a reattach, a restart): a new event bus
        agent.session, provider, MemoryNotebook(), EchoKernel(), runtime.settings, hooks=hooks
    )
    runtime.agents[again.session_id] = again
    asyncio.run(again.run_turn("again"))
    run = autonomy.run(again.session_id)
    assert run is not None and (run.turn, run.ended, run.reason) == (2, True, "continuations_used")
    ended = [e for e in again.session.path() if e["type"] == "autonomy" and e["event"] == "ended"]
    assert len(ended) == 2


def test_the_runtime_asks_the_autonomous_continuer_last(tmp_path: Path) -> None:
    # After the goal continuer (docs/autonomy.md): an active goal continues first, and a goal
    # completed during an autonomous run ends it `goal_complete`.
    environment = SimpleNamespace(kernel_key=lambda kernel_id: None)
    signer = Signer.load(tmp_path / "secret")
    runtime = AgentRuntime(
        SessionRepository(tmp_path / "sessions"), environment, Settings(), signer
    )  # type: ignore[arg-type]
    assert runtime.continuers.names[-1] == "autonomous"
    assert runtime.autonomy.settings is runtime.settings
