"""The Agents View's rows, built from session logs on disk (agents the server never loaded):
the tree walk, outcome, tokens and cost own and total, and a log read again only when it
changed (core/agents_overview.py, docs/agents-view.md)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from prime_agent_lab.core.agents_overview import AgentsOverviewBuilder, parse_state
from prime_agent_lab.core.runtime import AgentRuntime
from prime_agent_lab.core.sessions import SESSION_FILE, SessionLog, SessionRepository
from prime_agent_lab.core.settings import Settings


def runtime_over(root: Path) -> AgentRuntime:
    """A runtime over the sessions in `root` with no agent loaded (as after a restart)."""
    return AgentRuntime(
        SessionRepository(root), SimpleNamespace(kernel_key=lambda _: None), Settings()
    )


def turn(
    log: SessionLog,
    tokens: tuple[int, int],
    stop_reason: str = "end_turn",
    *,
    from_parent: str | None = None,
    reply: bool = False,
) -> None:
    origin = {"from_session_id": from_parent, "relationship": "parent"} if from_parent else {}
    log.append("user_message", text="do it", **origin)
    usage = {"input_tokens": tokens[0], "output_tokens": tokens[1]}
    log.append(
        "assistant_message", text="ok", usage=usage, provider="anthropic", model="claude-haiku-4-5"
    )
    if reply:
        log.append("message_sent", relationship="parent", text="found it")
    log.append("turn_end", turn=log.turns(), stop_reason=stop_reason, final_text="ok")


def child_of(repo: SessionRepository, parent: SessionLog, name: str, depth: int = 1) -> SessionLog:
    time.sleep(0.002)  # children are ordered by creation time
    return repo.create(
        notebook_path=f"work/study.agents/{name}.ipynb",
        provider="scripted",
        model="demo",
        parent_session_id=parent.session_id,
        name=name,
        depth=depth,
        task="find it",
    )


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Any]:
    runtime = runtime_over(tmp_path)
    repo = runtime.repository
    old = repo.create(notebook_path="old.ipynb", provider="scripted", model="demo")
    turn(old, (5, 1), "error")
    time.sleep(0.002)
    root = repo.create(notebook_path="work/study.ipynb", provider="scripted", model="demo")
    turn(root, (1000, 100))
    alpha = child_of(repo, root, "alpha")
    turn(alpha, (200, 20), from_parent=root.session_id, reply=True)
    beta = child_of(repo, root, "beta")
    turn(beta, (300, 30), "stopped", from_parent=root.session_id)
    deep = child_of(repo, alpha, "deep", depth=2)
    turn(deep, (40, 4), from_parent=alpha.session_id)
    gone = child_of(repo, root, "gone")
    turn(gone, (7, 7), from_parent=root.session_id)
    runtime.family.mark_deleted(gone.session_id, gone.directory)
    return {"runtime": runtime, "root": root, "alpha": alpha, "beta": beta, "deep": deep}


def test_rows_walk_the_tree_depth_first_with_outcomes_and_totals_read_from_disk(
    tree: dict[str, Any],
) -> None:
    overview = AgentsOverviewBuilder(tree["runtime"]).overview()
    rows = overview["agents"]

    assert [(r["name"], r["depth"]) for r in rows] == [
        ("study", 0),
        ("alpha", 1),
        ("deep", 2),
        ("beta", 1),
        ("old", 0),
    ]
    by_name = {r["name"]: r for r in rows}
    assert [by_name[n]["outcome"] for n in ("study", "alpha", "deep", "beta", "old")] == [
        "completed",
        "replied",
        "completed",
        "stopped",
        "error",
    ]
    assert all(r["residency"] == "evicted" and r["state"] == "idle" for r in rows)
    root, alpha = by_name["study"], by_name["alpha"]
    assert root["tokens_own"] == {"input": 1000, "output": 100}
    # the deleted child's tokens still count: what was spent stays spent
    assert root["tokens_total"] == {"input": 1547, "output": 161}
    assert alpha["tokens_total"] == {"input": 240, "output": 24}
    assert (
        alpha["parent_id"] == root["session_id"]
        and by_name["deep"]["root_id"] == root["session_id"]
    )
    assert root["notebook"] == "work/study.ipynb" and alpha["model"] == "scripted · demo"
    assert root["cost_own"] is not None and root["cost_total"] is not None
    assert root["cost_total"] > root["cost_own"] > 0
    assert [r["can_message"] for r in rows] == [True, True, False, True, True]
    assert [r["can_delete"] for r in rows] == [False, True, True, True, False]
    assert overview["generated_at"].endswith("Z")


def test_a_log_is_read_again_only_when_its_file_changed(tree: dict[str, Any]) -> None:
    builder = AgentsOverviewBuilder(tree["runtime"])
    builder.overview()
    first = builder.logs_read

    builder.overview()
    assert builder.logs_read == first  # nothing changed: no log read

    turn(tree["beta"], (1, 1), from_parent=tree["root"].session_id)
    rows = {r["name"]: r for r in builder.overview()["agents"]}
    assert builder.logs_read == first + 1
    assert rows["beta"]["outcome"] == "completed"
    assert rows["study"]["tokens_total"]["input"] == 1548


def test_a_damaged_log_does_not_take_the_overview_down(
    tree: dict[str, Any],
) -> None:
    beta: SessionLog = tree["beta"]
    with (beta.directory / SESSION_FILE).open("ab") as file:
        file.write(b'{"type": "turn_end", "id": \n' * 3)

    rows = {r["name"]: r for r in AgentsOverviewBuilder(tree["runtime"]).overview()["agents"]}

    assert set(rows) == {"study", "alpha", "deep", "beta", "old"}
    assert rows["alpha"]["outcome"] == "replied"


def test_the_state_filter_takes_only_the_states_there_are(tree: dict[str, Any]) -> None:
    builder = AgentsOverviewBuilder(tree["runtime"])
    assert builder.overview(parse_state("running"))["agents"] == []
    assert len(builder.overview(parse_state("idle"))["agents"]) == 5
    assert parse_state(None) is None and parse_state("") is None
    with pytest.raises(ValueError, match="state must be one of running, idle, waiting"):
        parse_state("sleeping")
