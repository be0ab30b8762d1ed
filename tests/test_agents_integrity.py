"""Session folders the server did not write, or that went away, in the Agents View and the tree of
agents: a folder removed from disk leaves the rows at the next read, and a header from elsewhere
(a clone) that breaks the tree's rules is a refused member, shown with its reason and never
loaded (core/family.py, core/member_rules.py, core/agents_overview.py, docs/agent-tree.md)."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from prime_agent_lab.agents_cli import tree_text
from prime_agent_lab.core.agents_overview import AgentsOverviewBuilder
from prime_agent_lab.core.family import FamilyError
from prime_agent_lab.core.mailbox import MAILBOX_FILE, SIGNED_FOR
from prime_agent_lab.core.runtime import AgentRuntime
from prime_agent_lab.core.sessions import SessionLog

from .test_agents_overview import child_of, runtime_over, turn
from .test_agents_overview import tree as tree


def rows_of(builder: AgentsOverviewBuilder) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in builder.overview()["agents"]}


def forge(runtime: AgentRuntime, session_id: str, parent: str | None, **header: Any) -> SessionLog:
    """A session folder as a clone brings it: any header, written by someone else."""
    fields: dict[str, Any] = {
        "session_id": session_id,
        "provider": "scripted",
        "model": "demo",
        "notebook_path": "work/study.agents/forged.ipynb",
        **({"parent_session_id": parent, "depth": 1, "task": "t"} if parent else {}),
        **header,
    }
    log = SessionLog.create(runtime.repository.root / session_id, fields)
    turn(log, (9000, 900), from_parent=parent)
    return log


# ---------------------------------------------------------------- folders removed from disk


def test_a_removed_session_folder_leaves_the_overview_at_the_next_read(
    tree: dict[str, Any],
) -> None:
    runtime: AgentRuntime = tree["runtime"]
    builder = AgentsOverviewBuilder(runtime)
    assert "beta" in rows_of(builder)

    shutil.rmtree(tree["beta"].directory)  # the user deletes the folder, or `git clean`
    rows = rows_of(builder)

    assert set(rows) == {"study", "alpha", "deep", "old"}
    assert runtime.family.member(tree["beta"].session_id) is None
    assert [m.name for m in runtime.family.children(tree["root"].session_id)] == ["alpha"]
    assert rows["study"]["tokens_total"] == {"input": 1247, "output": 131}  # beta's log is gone

    shutil.rmtree(tree["alpha"].directory)  # a parent's folder: its child stays, refused
    rows = rows_of(builder)
    assert set(rows) == {"study", "deep", "old"}
    assert "parent session" in rows["deep"]["problem"] and rows["deep"]["depth"] == 0

    shutil.rmtree(runtime.repository.root)  # the whole sessions folder
    assert builder.overview()["agents"] == []


def test_a_resident_agent_whose_folder_vanished_is_listed_with_that_said_until_it_leaves_memory(
    tree: dict[str, Any],
) -> None:
    runtime: AgentRuntime = tree["runtime"]
    alpha: SessionLog = tree["alpha"]
    runtime.agents[alpha.session_id] = SimpleNamespace(  # type: ignore[assignment]
        session=alpha, running=False, current_cell_id=None
    )
    builder = AgentsOverviewBuilder(runtime)
    assert rows_of(builder)["alpha"]["problem"] is None

    shutil.rmtree(alpha.directory)
    rows = rows_of(builder)
    assert rows["alpha"]["residency"] == "resident"
    assert "removed from disk" in rows["alpha"]["problem"]
    assert rows["alpha"]["parent_id"] == tree["root"].session_id  # still in its tree
    assert rows["deep"]["problem"] is None  # its child's folder is there
    assert runtime.family.member(alpha.session_id) is not None

    del runtime.agents[alpha.session_id]  # evicted
    rows = rows_of(builder)
    assert "alpha" not in rows
    assert "parent session" in rows["deep"]["problem"]


# ---------------------------------------------------------------- headers from elsewhere

HOSTILE = {
    "outside": ({"notebook_path": "../outside.ipynb"}, "leaves the server root"),
    "absolute": ({"notebook_path": "/tmp/absolute.ipynb"}, "not in its parent's sub-agent folder"),
    "windows": ({"notebook_path": "C:\\x.ipynb"}, "not a POSIX path"),
    "not-a-notebook": ({"notebook_path": "work/study.agents/x.py"}, "not a notebook"),
    "cwd-outside": ({"parent_notebook_path": "../../etc/x.ipynb"}, "parent_notebook_path"),
    "deep-claim": ({"depth": 3}, "depth 3, but its parent 'work/study.ipynb' is at depth 0"),
    "zero-depth": ({"depth": 0}, "is not a sub-agent's"),
    "alpha": ({}, "already has the name"),  # the name the real child already has
}


def test_child_headers_that_break_the_tree_rules_are_refused_rows_with_the_reason(
    tree: dict[str, Any],
) -> None:
    runtime: AgentRuntime = tree["runtime"]
    root = tree["root"].session_id
    for index, (name, (header, _)) in enumerate(HOSTILE.items()):
        forge(runtime, f"29990101-000000-h{index:05d}", root, name=name, **header)
    forge(runtime, "29990101-000000-orphan", "29990101-000000-nobody", name="orphan")
    forge(runtime, "29990101-000000-loop-a", "29990101-000000-loop-b", name="loop-a")
    forge(runtime, "29990101-000000-loop-b", "29990101-000000-loop-a", name="loop-b")
    forge(runtime, "29990101-000000-bad-name", root, name="../../x")
    forge(runtime, "29990101-000000-under", "29990101-000000-h00000", name="under", depth=2)

    rows = {r["session_id"]: r for r in AgentsOverviewBuilder(runtime).overview()["agents"]}

    sound = {r["name"]: r for r in rows.values() if r["problem"] is None}
    assert set(sound) == {"study", "alpha", "deep", "beta", "old"}  # as before: untouched
    assert sound["study"]["tokens_total"] == {"input": 1547, "output": 161}  # no forged spend
    assert sound["alpha"]["session_id"] == tree["alpha"].session_id
    for index, (name, (_, why)) in enumerate(HOSTILE.items()):
        row = rows[f"29990101-000000-h{index:05d}"]
        assert why in row["problem"], (name, row["problem"])
        assert row["name"] == name and row["depth"] == 0 and row["parent_id"] is None
        assert row["notebook"] is None and not row["can_message"] and not row["can_delete"]
    assert "is not in this sessions folder" in rows["29990101-000000-orphan"]["problem"]
    assert "loop back" in rows["29990101-000000-loop-a"]["problem"]
    assert "loop back" in rows["29990101-000000-loop-b"]["problem"]
    assert "not a valid sub-agent name" in rows["29990101-000000-bad-name"]["problem"]
    assert "its parent 'outside' is refused" in rows["29990101-000000-under"]["problem"]
    family = runtime.family
    assert [m.name for m in family.children(root)] == ["alpha", "beta"]  # no forged child
    assert family.relationship(root, "29990101-000000-h00006") is None


def test_a_refused_child_is_never_loaded_nor_given_a_kernel(tree: dict[str, Any]) -> None:
    runtime: AgentRuntime = tree["runtime"]
    started: list[Any] = []
    runtime.environment = SimpleNamespace(  # type: ignore[assignment]
        kernel_key=lambda _: None,
        provider=lambda *a: started.append(("provider", a)),
        open_notebook=lambda *a: started.append(("notebook", a)),
        start_child_kernel=lambda *a: started.append(("kernel", a)),
    )
    forge(runtime, "29990101-000000-wrong-depth", tree["root"].session_id, name="x", depth=4)

    async def load() -> None:
        await runtime.ensure_loaded("29990101-000000-wrong-depth")

    with pytest.raises(FamilyError) as refused:
        asyncio.run(load())
    assert refused.value.status == 409 and "refused" in refused.value.message
    assert "depth 4" in refused.value.message
    assert started == [] and "29990101-000000-wrong-depth" not in runtime.agents


def test_children_the_product_writes_are_never_refused(tmp_path: Path) -> None:
    runtime = runtime_over(tmp_path)
    repo = runtime.repository
    root = repo.create(notebook_path="a b/study.ipynb", provider="scripted", model="demo")
    child = repo.create(
        notebook_path="a b/study.agents/part-a.ipynb",
        provider="scripted",
        model="demo",
        parent_session_id=root.session_id,
        name="part-a",
        depth=1,
        task="t",
        parent_notebook_path="a b/study.ipynb",
    )
    time.sleep(0.002)
    gone = repo.create(
        notebook_path="a b/study.agents/part-b.ipynb",
        provider="scripted",
        model="demo",
        parent_session_id=root.session_id,
        name="part-b",
        depth=1,
        task="t",
    )
    runtime.family.mark_deleted(gone.session_id, gone.directory)
    time.sleep(0.002)  # siblings are listed by creation time (a CI run failed on a tie)
    again = repo.create(  # a deleted sub-agent frees its name
        notebook_path="a b/study.agents/part-b-2.ipynb",
        provider="scripted",
        model="demo",
        parent_session_id=root.session_id,
        name="Part-B",
        depth=1,
        task="t",
    )
    rows = AgentsOverviewBuilder(runtime_over(tmp_path)).overview()["agents"]
    assert [(r["name"], r["problem"]) for r in rows] == [
        ("study", None),
        ("part-a", None),
        ("Part-B", None),
    ]
    assert {child.session_id, again.session_id} <= {r["session_id"] for r in rows}


def test_a_headless_runs_children_of_a_notebook_outside_its_folder_are_sound(
    tmp_path: Path,
) -> None:
    """`prime-agent-lab run` on a notebook outside its folder names it by its absolute path
    (headless.session_notebook); its sub-agents' notebooks sit in that notebook's folder."""
    runtime = runtime_over(tmp_path)
    repo = runtime.repository
    root = repo.create(notebook_path="/data/study.ipynb", provider="scripted", model="demo")
    repo.create(
        notebook_path="/data/study.agents/part-a.ipynb",
        provider="scripted",
        model="demo",
        parent_session_id=root.session_id,
        name="part-a",
        depth=1,
        task="t",
    )
    repo.create(
        notebook_path="/etc/part-b.ipynb",
        provider="scripted",
        model="demo",
        parent_session_id=root.session_id,
        name="part-b",
        depth=1,
        task="t",
    )
    rows = {r["name"]: r for r in AgentsOverviewBuilder(runtime).overview()["agents"]}
    assert rows["part-a"]["problem"] is None and rows["part-a"]["depth"] == 1
    assert "not in its parent's sub-agent folder '/data/study.agents'" in rows["part-b"]["problem"]


def test_the_terminal_tree_says_why_a_session_is_refused(tree: dict[str, Any]) -> None:
    runtime: AgentRuntime = tree["runtime"]
    forge(runtime, "29990101-000000-forged", tree["root"].session_id, name="x", depth=4)

    text = tree_text(AgentsOverviewBuilder(runtime).overview()["agents"])

    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("x "))
    assert lines[at + 1].startswith("  ! Refused: its header says depth 4")
    assert sum(line.lstrip().startswith("! ") for line in lines) == 1


def test_mail_queued_for_a_member_the_tree_now_refuses_is_undeliverable_and_its_sender_told(
    tmp_path: Path,
) -> None:
    runtime = runtime_over(tmp_path)
    repo = runtime.repository
    root = repo.create(notebook_path="work/study.ipynb", provider="scripted", model="demo")
    alpha, beta = child_of(repo, root, "alpha"), child_of(repo, root, "beta")
    record = {
        "type": "queued",
        "ts": "2026-12-02T10:00:00.000Z",
        "message_id": "msg-1",
        "to_session_id": alpha.session_id,
        "to_name": "alpha",
        "from_session_id": beta.session_id,
        "from_name": "beta",
        "relationship": "sibling",
        "composed": "2026-12-02T10:00:00.000Z",
        "mode": "auto",
        "body": "the numbers are in",
    }
    signed = runtime.signer.sign_object(SIGNED_FOR, record)
    (alpha.directory / MAILBOX_FILE).write_text(json.dumps(signed) + "\n")
    shutil.rmtree(root.directory)  # both children now claim a parent that is not there

    restarted = runtime_over(tmp_path)
    assert restarted.mailbox.recover() == 0  # nothing waits: it would never load

    told = [
        e for e in repo.read(beta.session_id).entries if e.get("kind") == "message_undeliverable"
    ]
    assert len(told) == 1 and "the agent tree refuses it" in told[0]["text"]
    assert "is not in this sessions folder" in told[0]["text"]
    assert '"dropped"' in (alpha.directory / MAILBOX_FILE).read_text()


def test_a_folder_dropped_beside_an_agent_in_memory_never_takes_its_name_nor_its_children(
    tree: dict[str, Any],
) -> None:
    runtime: AgentRuntime = tree["runtime"]
    alpha = tree["alpha"]
    runtime.agents[alpha.session_id] = SimpleNamespace(  # type: ignore[assignment]
        session=alpha, running=False, current_cell_id=None
    )
    forge(  # older than the real one, a clean path, the right depth: only the name clashes
        runtime,
        "20200101-000000-dropped",
        tree["root"].session_id,
        name="alpha",
        created="2020-01-01T00:00:00.000Z",
        notebook_path="work/study.agents/evil.ipynb",
    )
    rows = {r["session_id"]: r for r in AgentsOverviewBuilder(runtime).overview()["agents"]}
    assert rows[alpha.session_id]["problem"] is None
    assert rows[tree["deep"].session_id]["problem"] is None
    assert rows[tree["deep"].session_id]["depth"] == 2
    assert "already has the name 'alpha'" in rows["20200101-000000-dropped"]["problem"]
    assert alpha.session_id in rows["20200101-000000-dropped"]["problem"]

    del runtime.agents[alpha.session_id]
    again = runtime_over(runtime.repository.root)  # after a restart: the oldest keeps the name
    rows = {r["session_id"]: r for r in AgentsOverviewBuilder(again).overview()["agents"]}
    assert "already has the name" in rows[alpha.session_id]["problem"]
    assert "its parent 'alpha' is refused" in rows[tree["deep"].session_id]["problem"]
    assert not rows[tree["deep"].session_id]["can_delete"]


@pytest.mark.parametrize("path", ["../../../etc/evil.ipynb", "/etc/passwd", "C:\\x.ipynb", ""])
def test_a_root_whose_notebook_path_is_not_a_clean_notebook_path_is_refused(
    tree: dict[str, Any], path: str
) -> None:
    runtime: AgentRuntime = tree["runtime"]
    forge(runtime, "29990101-000000-root", None, notebook_path=path)
    forge(runtime, "29990101-000000-kid", "29990101-000000-root", name="kid")
    rows = {r["session_id"]: r for r in AgentsOverviewBuilder(runtime).overview()["agents"]}
    root = rows["29990101-000000-root"]
    assert root["problem"] and root["notebook"] is None and not root["can_message"]
    assert "is refused" in rows["29990101-000000-kid"]["problem"]
