"""Usage and cost per agent of the tree: `rlm.usage()` in a real kernel, and the arithmetic."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from prime_agent_lab.core.agent import Agent
from prime_agent_lab.core.answer_cost import answer_cost
from prime_agent_lab.core.family import Family
from prime_agent_lab.core.messages import ModelResponse, Usage
from prime_agent_lab.core.ports import Price
from prime_agent_lab.core.runtime import AgentRuntime
from prime_agent_lab.core.sessions import SessionError, SessionLog, SessionRepository
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.core.tokens import reported_context
from prime_agent_lab.core.transcript import chat_transcript
from prime_agent_lab.core.usage import price_of, usage_report
from tests.test_core import ListProvider, make_agent
from tests.test_subagents import CHILD, WAIT_FOR_CHILDREN, headless, printed_json, run_tree

REPORT = (
    "u = await rlm.usage()\n"
    "import json\n"
    "print(u)\n"
    "print(json.dumps({'name': u.name, 'calls': u.calls, 'usage': u.usage, "
    "'usage_total': u.usage_total, 'cost': u.cost, 'cost_total': u.cost_total, "
    "'agents': [a.name for a in u.agents()], "
    "'children': [[c.name, c.status, c.calls, c.usage, c.usage_total, c.cost] "
    "for c in u.children]}))"
)


async def test_rlm_usage_in_the_kernel_gives_own_and_total_for_a_parent_and_its_child(
    tmp_path: Path,
) -> None:
    spawn = 'a = await rlm("alpha words", name="alpha")'
    turns = [{"code": spawn}, {"code": WAIT_FOR_CHILDREN}, {"code": REPORT}, {"text": "done"}]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": turns, "child": CHILD}), encoding="utf-8")
    run = headless(tmp_path, str(script))

    outcome, _ = await run_tree(run, "fan out and count")

    assert outcome.stop_reason == "end_turn", outcome
    report = printed_json(run, 2)
    (listed,) = run.runtime.list_children(run.agent.session_id)
    (child,) = report["children"]
    assert child == ["alpha", "completed", 2, listed["usage"], listed["usage_total"], 0.0]
    assert report["name"] == "" and report["agents"] == ["", "alpha"]
    # The three calls that wrote the three cells; the turn's answer came after.
    assert report["calls"] == 3
    assert report["usage"]["output_tokens"] > 0
    for key, value in report["usage"].items():
        assert report["usage_total"][key] == value + listed["usage_total"].get(key, 0)
    assert (report["cost"], report["cost_total"]) == (0.0, 0.0)
    entries = run.agent.session.entries
    observation = [e for e in entries if e["type"] == "tool_result"][2]["observation"]
    assert "agent  status  calls" in observation
    assert "\n  alpha  completed  2  " in observation  # the child, indented under its parent


def test_a_price_is_the_longest_matching_prefix_of_the_provider_that_answered() -> None:
    assert price_of("anthropic", "claude-sonnet-4-5-20250929") == Price(3.0, 15.0, 0.3, 3.75)
    assert price_of("anthropic", "claude-opus-4-1") == Price(15.0, 75.0, 1.5, 18.75)
    assert price_of("anthropic", "claude-opus-4-5") == Price(5.0, 25.0, 0.5, 6.25)
    assert price_of("openai", "gpt-4.1-mini") == Price(0.4, 1.6, 0.1, 0.0)
    assert price_of("openai", "openai/gpt-4o") == Price(2.5, 10.0, 1.25, 0.0)
    assert price_of("scripted", "demo") == Price(0.0, 0.0, 0.0, 0.0)
    assert price_of("openai", "claude-sonnet-4-5") is None  # not what that vendor sells
    assert price_of("anthropic", "my-local-model") is None


@dataclass
class StoredTree:
    """The agent tree as `usage_report` reads it, of sessions on disk (no agent attached)."""

    repository: SessionRepository
    agents: dict[str, Agent] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.family = Family(self.repository)

    def child_status(self, child_id: str) -> str:
        return self.statuses.get(child_id, "inactive")


def with_calls(session: SessionLog, *calls: tuple[str, str, dict[str, int]]) -> SessionLog:
    for provider, model, usage in calls:
        session.append(
            "assistant_message",
            turn=1,
            text="",
            tool_calls=[],
            usage=usage,
            provider=provider,
            model=model,
        )
    return session


def test_cost_adds_each_calls_list_price_and_is_unknown_when_one_model_has_none(
    tmp_path: Path,
) -> None:
    repository = SessionRepository(tmp_path / "sessions")
    million = {"input_tokens": 1_000_000, "output_tokens": 100_000, "cache_read_tokens": 0}
    root = with_calls(
        repository.create(notebook_path="a.ipynb", provider="anthropic", model="claude-sonnet-4-5"),
        ("anthropic", "claude-sonnet-4-5", million),
        ("anthropic", "claude-sonnet-4-5", {"cache_read_tokens": 1_000_000, "output_tokens": 0}),
    )
    priced = with_calls(
        repository.create(
            notebook_path="a.agents/cheap.ipynb",
            provider="openai",
            model="gpt-4.1-mini",
            parent_session_id=root.session_id,
            name="cheap",
            depth=1,
        ),
        ("openai", "gpt-4.1-mini", million),
    )
    tree = StoredTree(repository, statuses={priced.session_id: "completed"})

    report = usage_report(tree, root.session_id)

    assert report["calls"] == 2
    assert report["usage"] == {
        "input_tokens": 1_000_000,
        "output_tokens": 100_000,
        "cache_read_tokens": 1_000_000,
    }
    assert report["cost"] == pytest.approx(3.0 + 1.5 + 0.3)
    (child,) = report["children"]
    assert (child["name"], child["status"], child["model"]) == (
        "cheap",
        "completed",
        "openai/gpt-4.1-mini",
    )
    assert child["cost"] == pytest.approx(0.4 + 0.16)
    assert report["cost_total"] == pytest.approx(4.8 + 0.56)
    assert report["usage_total"]["input_tokens"] == 2_000_000

    tree.family.mark_deleted(priced.session_id, repository.directory(priced.session_id))
    after = usage_report(tree, root.session_id)
    assert after["usage_total"] == report["usage_total"]  # what it spent stays spent
    assert after["cost_total"] == report["cost_total"]
    assert [(c["name"], c["status"]) for c in after["children"]] == [("cheap", "deleted")]

    with_calls(repository.load(priced.session_id), ("openai", "local-llama", {"input_tokens": 5}))
    report = usage_report(tree, root.session_id)
    assert report["children"][0]["cost"] is None
    assert report["cost"] == pytest.approx(4.8)  # its own calls are still priced
    assert report["cost_total"] is None  # the tree's total is not known


def test_usage_of_a_session_that_does_not_exist_is_a_lookup_error(tmp_path: Path) -> None:
    tree = StoredTree(SessionRepository(tmp_path / "sessions"))
    with pytest.raises(LookupError, match="no session"):
        usage_report(tree, "nosuchsession")


def test_a_fork_counts_only_the_calls_it_made_itself(tmp_path: Path) -> None:
    repository = SessionRepository(tmp_path / "sessions")
    calls = {"input_tokens": 100, "output_tokens": 10}
    origin = with_calls(
        repository.create(notebook_path="a.ipynb", provider="scripted", model="demo"),
        ("scripted", "demo", calls),
        ("scripted", "demo", calls),
    )
    fork = repository.create(
        notebook_path="a-fork-1.ipynb",
        provider="scripted",
        model="demo",
        forked_from={"session_id": origin.session_id, "entry_id": origin.entries[-1]["id"]},
        copied_entries=len(origin.entries),
    )
    fork.adopt(origin.entries)  # as core/branching.py copies them: ids and times kept
    with_calls(fork, ("scripted", "demo", {"input_tokens": 7, "output_tokens": 1}))
    tree = StoredTree(repository)

    report = usage_report(tree, fork.session_id)

    assert report["calls"] == 1
    assert report["usage"] == {"input_tokens": 7, "output_tokens": 1}
    assert usage_report(tree, origin.session_id)["calls"] == 2


DEMO = {"provider": "scripted", "model": "demo"}
NOT_TOKEN_COUNTS = [10**400, 2**63, -5, True, 1e308, 1.5, "12"]
"""Usage figures no model reports, as a hostile or damaged log may hold them."""


def test_usage_figures_that_are_not_token_counts_are_ignored_named_and_leave_the_cost_unknown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    repository = SessionRepository(tmp_path / "sessions")
    good = {"input_tokens": 1_000_000, "output_tokens": 10}
    bad = [
        ("anthropic", "claude-sonnet-4-5", {"input_tokens": v, "output_tokens": 1})
        for v in NOT_TOKEN_COUNTS
    ]
    root = with_calls(
        repository.create(notebook_path="a.ipynb", provider="anthropic", model="claude-sonnet-4-5"),
        ("anthropic", "claude-sonnet-4-5", good),
        *bad,
    )
    tree = StoredTree(repository)

    report = usage_report(tree, root.session_id)

    json.dumps(report, allow_nan=False)  # what the route answers is JSON
    assert report["calls"] == 1 + len(NOT_TOKEN_COUNTS)
    assert report["usage"] == {"input_tokens": 1_000_000, "output_tokens": 10 + len(bad)}
    assert report["usage_total"] == report["usage"]
    assert report["cost"] is None and report["cost_total"] is None  # those calls cannot be priced
    named = [r.getMessage() for r in caplog.records if root.session_id in r.getMessage()]
    assert len(named) == len(NOT_TOKEN_COUNTS)
    assert "input_tokens=" + "1" + "0" * 20 + "..." in named[0]
    assert "input_tokens=-5" in named[2] and "input_tokens=True" in named[3]
    caplog.clear()
    assert usage_report(tree, root.session_id) == report
    assert not caplog.records  # named once, not at every look


@pytest.mark.parametrize(
    "figure",
    [10**400, float("inf"), float("nan"), 1e308, -1, True],
    ids=["10**400", "inf", "nan", "1e308", "negative", "bool"],
)
def test_an_answer_whose_usage_is_not_token_counts_has_an_unknown_cost_and_no_context_size(
    figure: object,
) -> None:
    usage = {"input_tokens": figure, "output_tokens": 3}

    assert answer_cost("anthropic", "claude-sonnet-4-5", usage)["cost"] is None
    assert answer_cost("anthropic", "claude-sonnet-4-5", {"output_tokens": 3})["cost"] == (
        pytest.approx(45 / 1_000_000)
    )
    assert Price(3.0, 15.0, 0.3, 3.75).of(usage) == pytest.approx(45 / 1_000_000)
    assert reported_context(usage) is None  # only the output: nothing the model read
    assert reported_context({**usage, "cache_read_tokens": 7}) == 10


class PricedListProvider(ListProvider):
    name = "anthropic"
    model = "claude-sonnet-4-5"


def test_usage_a_provider_reports_as_nan_or_out_of_range_is_recorded_as_null_and_the_log_loads(
    tmp_path: Path,
) -> None:
    reported = Usage(input_tokens=float("nan"), output_tokens=10**400, cache_read_tokens=5)  # type: ignore[arg-type]
    provider = PricedListProvider([ModelResponse(text="done", usage=reported)])
    agent, _ = make_agent(tmp_path, provider)
    seen: list[dict[str, Any]] = []
    agent.events.add_listener(seen.append)

    outcome = asyncio.run(agent.run_turn("go"))

    assert outcome.final_text == "done"
    reloaded = SessionRepository(tmp_path).load(agent.session_id)  # the strict reader
    (answer,) = [e for e in reloaded.entries if e["type"] == "assistant_message"]
    assert answer["usage"] == {
        "input_tokens": None,
        "output_tokens": None,
        "cache_read_tokens": 5,
        "cache_write_tokens": 0,
    }
    (event,) = [e for e in seen if e["type"] == "assistant_message"]
    assert event["usage"] == {"cache_read_tokens": 5, "cache_write_tokens": 0}
    assert event["cost"] is None
    (item,) = [i for i in chat_transcript(reloaded) if i["type"] == "assistant"]
    assert item["usage"] == event["usage"] and item["cost"] is None  # as it was live


def test_a_record_that_would_not_load_back_is_not_written(tmp_path: Path) -> None:
    session = SessionRepository(tmp_path).create(notebook_path="a.ipynb")

    with pytest.raises(SessionError, match="not written"):
        session.append("assistant_message", turn=1, text="", usage={"input_tokens": float("inf")})

    assert SessionRepository(tmp_path).load(session.session_id).entries == []


def test_usage_of_sessions_whose_headers_make_a_loop_counts_each_once(tmp_path: Path) -> None:
    repository = SessionRepository(tmp_path / "sessions")
    calls = ("scripted", "demo", {"input_tokens": 10, "output_tokens": 1})
    a = with_calls(repository.create(notebook_path="a.ipynb", **DEMO), calls)
    b = with_calls(
        repository.create(
            notebook_path="a.agents/b.ipynb",
            parent_session_id=a.session_id,
            name="b",
            depth=1,
            **DEMO,
        ),
        calls,
    )
    lines = a.file.read_text().splitlines()  # a hand-edited header: a's parent is b
    header = {**json.loads(lines[0]), "parent_session_id": b.session_id, "name": "a"}
    a.file.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    tree = StoredTree(repository)

    report = usage_report(tree, a.session_id)

    # A loop of headers is refused (docs/agent-tree.md, "Headers from elsewhere"): neither is
    # the other's sub-agent, so each counts once, for itself.
    assert report["children"] == []
    assert report["usage_total"] == {"input_tokens": 10, "output_tokens": 1}
    assert "loop back" in tree.family.member(b.session_id).problem


def test_a_runtimes_tree_usage_and_descendants_cut_a_loop_of_headers(tmp_path: Path) -> None:
    repository = SessionRepository(tmp_path / "sessions")
    calls = ("scripted", "demo", {"input_tokens": 10, "output_tokens": 1})
    a = with_calls(repository.create(notebook_path="a.ipynb", **DEMO), calls)
    b = with_calls(
        repository.create(
            notebook_path="a.agents/b.ipynb",
            parent_session_id=a.session_id,
            name="b",
            depth=1,
            **DEMO,
        ),
        calls,
    )
    lines = a.file.read_text().splitlines()  # a hand-edited header: a's parent is b
    header = {**json.loads(lines[0]), "parent_session_id": b.session_id, "name": "a"}
    a.file.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    runtime = AgentRuntime(repository, SimpleNamespace(kernel_key=None), Settings())  # type: ignore[arg-type]

    # A loop of headers is refused (docs/agent-tree.md, "Headers from elsewhere"): neither is
    # the other's sub-agent, so each counts once, for itself, and nothing recurses.
    assert runtime.tree_usage(a.session_id) == {"input_tokens": 10, "output_tokens": 1}
    assert runtime.tree_usage(b.session_id) == {"input_tokens": 10, "output_tokens": 1}
    assert runtime.descendants(a.session_id) == [] and runtime.descendants(b.session_id) == []
    assert runtime.list_children(a.session_id) == []
    assert runtime.family.member(a.session_id).refused
