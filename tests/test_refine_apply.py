"""Applying refinement edits to a harness store, and rolling them back (no agent, no model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.harness.refine_apply import (
    NOT_EDITABLE,
    apply_edits,
    baseline_of,
    rollback_edits,
)
from prime_agent_lab.core.harness.store import HarnessStore

CONTRACT = {"type": "python", "import": "statistics", "callable": "mean"}
CONTENT_FIELDS = ("title", "content", "path", "reference", "arguments", "metadata")


@pytest.fixture
def store(tmp_path: Path) -> HarnessStore:
    return HarnessStore(tmp_path / "local", "local")


def _apply(store: HarnessStore, edits: list[Any]) -> list[dict[str, Any]]:
    return apply_edits(store, edits, baseline_of(store.read()))


def test_valid_edits_of_every_action_are_applied_with_before_and_after(
    store: HarnessStore,
) -> None:
    store.create("memory", {"title": "old fact", "content": "x"})
    store.create("prompt", {"title": "units", "content": "metres"})
    records = _apply(
        store,
        [
            {"action": "create", "kind": "memory", "title": "flaky test", "content": "retry 3x"},
            {"action": "update", "kind": "prompt", "id": "units", "content": "report in metres"},
            {"action": "delete", "kind": "memory", "id": "local:old_fact"},
            {
                "action": "create",
                "kind": "skill",
                "title": "mean",
                "content": "Average of numbers.",
                "reference": CONTRACT,
                "arguments": {"data": "list[float]"},
            },
        ],
    )
    assert [r["applied"] for r in records] == [True, True, True, True]
    assert [r["error"] for r in records] == [None] * 4
    assert records[0]["id"] == "flaky_test" and records[0]["before"] is None
    assert records[0]["after"]["source"] == "refine"
    assert records[1]["before"]["content"] == "metres"
    assert records[1]["after"]["content"] == "report in metres"
    assert records[1]["after"]["version"] == 2
    assert records[2]["id"] == "old_fact" and records[2]["after"] is None
    assert store.get("memory", "flaky_test").content == "retry 3x"
    assert store.get("memory", "old_fact") is None
    assert store.get("skill", "mean").reference == CONTRACT


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (
            {"action": "update", "kind": "prompt", "id": "base_system_prompt", "content": "x"},
            NOT_EDITABLE,
        ),
        (
            {"action": "create", "kind": "prompt", "title": "Base system prompt", "content": "x"},
            NOT_EDITABLE,
        ),
        ({"action": "create", "kind": "lesson", "title": "t", "content": "c"}, "unsupported kind"),
        ({"action": "rename", "kind": "memory", "id": "a"}, "unsupported action"),
        ({"action": "create", "kind": "skill", "title": "s", "content": "c"}, "call contract"),
        (
            {
                "action": "create",
                "kind": "skill",
                "title": "s",
                "content": "c",
                "reference": {"import": "statistics", "callable": "mean"},
                "arguments": {},
            },
            'type must be "python"',
        ),
        (
            {  # an installed package of that name would always win over the skill's module
                "action": "create",
                "kind": "skill",
                "title": "s",
                "content": "c",
                "reference": {
                    "type": "python",
                    "import": "pytest",
                    "callable": "f",
                    "source": "def f():\n    return 1\n",
                },
                "arguments": {},
            },
            "module name 'pytest' is already importable",
        ),
        ({"action": "update", "kind": "memory", "id": "nobody", "content": "c"}, "not found"),
        ({"action": "delete", "kind": "memory", "id": "nobody"}, "not found"),
        (
            {"action": "create", "kind": "memory", "id": "kept", "title": "t", "content": "c"},
            "already exists",
        ),
        (
            {"action": "update", "kind": "memory", "id": "global:kept", "content": "c"},
            "cannot edit global entries",
        ),
        ("delete everything", "must be an object"),
    ],
)
def test_a_rejected_edit_changes_nothing_and_is_recorded_with_why(
    store: HarnessStore, edit: Any, error: str
) -> None:
    store.create("memory", {"id": "kept", "title": "kept", "content": "as it was"})
    revision = store.revision()
    (record,) = _apply(store, [edit])
    assert record["applied"] is False
    assert error in record["error"]
    assert record["before"] is None and record["after"] is None
    assert store.revision() == revision
    assert [e.id for e in store.list()] == ["kept"]


def test_a_rejected_edit_does_not_stop_the_valid_ones(store: HarnessStore) -> None:
    records = _apply(
        store,
        [
            {"action": "update", "kind": "prompt", "id": "base_system_prompt", "content": "x"},
            {"action": "create", "kind": "memory", "title": "fact", "content": "c"},
        ],
    )
    assert [r["applied"] for r in records] == [False, True]
    assert store.get("memory", "fact") is not None


def test_a_local_refinement_does_not_see_global_only_entries(tmp_path: Path) -> None:
    shared = HarnessStore(tmp_path / "global", "global")
    shared.create("memory", {"title": "house style", "content": "short"})
    local = HarnessStore(tmp_path / "local", "local")
    (record,) = _apply(
        local, [{"action": "update", "kind": "memory", "id": "house_style", "content": "long"}]
    )
    assert record["applied"] is False and "not found" in record["error"]
    assert shared.get("memory", "house_style").content == "short"


def test_an_entry_changed_between_plan_and_apply_survives(store: HarnessStore) -> None:
    store.create("memory", {"title": "fact", "content": "planned on this"})
    baseline = baseline_of(store.read())
    store.update("memory", "fact", {"content": "another writer's"})
    (record,) = apply_edits(
        store,
        [{"action": "update", "kind": "memory", "id": "fact", "content": "refined"}],
        baseline,
    )
    assert record["applied"] is False
    assert "changed during planning" in record["error"]
    assert store.get("memory", "fact").content == "another writer's"


def test_an_entry_created_during_planning_is_not_deleted(store: HarnessStore) -> None:
    baseline = baseline_of(store.read())
    store.create("memory", {"title": "fact", "content": "new"})
    (record,) = apply_edits(store, [{"action": "delete", "kind": "memory", "id": "fact"}], baseline)
    assert record["applied"] is False and "changed during planning" in record["error"]


def test_two_edits_of_one_entry_in_one_proposal_both_apply(store: HarnessStore) -> None:
    store.create("memory", {"title": "fact", "content": "v1"})
    records = _apply(
        store,
        [
            {"action": "update", "kind": "memory", "id": "fact", "content": "v2"},
            {"action": "update", "kind": "memory", "id": "fact", "title": "Fact"},
        ],
    )
    assert [r["applied"] for r in records] == [True, True]
    entry = store.get("memory", "fact")
    assert (entry.title, entry.content, entry.version) == ("Fact", "v2", 3)


def _content(entry: Any) -> dict[str, Any]:
    data = entry if isinstance(entry, dict) else entry.to_dict()
    return {name: data[name] for name in CONTENT_FIELDS}


def test_rollback_restores_the_exact_earlier_content_and_versions_keep_rising(
    store: HarnessStore,
) -> None:
    store.create(
        "memory",
        {"title": "fact", "content": "original", "path": "facts", "metadata": {"n": 1}},
    )
    store.create("prompt", {"title": "units", "content": "metres"})
    original = {e.id: e.to_dict() for e in store.list()}
    records = _apply(
        store,
        [
            {
                "action": "update",
                "kind": "memory",
                "id": "fact",
                "content": "changed",
                "path": "other",
                "metadata": {"n": 2},
            },
            {"action": "delete", "kind": "prompt", "id": "units"},
            {"action": "create", "kind": "memory", "title": "new", "content": "added"},
        ],
    )
    edits, baseline = rollback_edits({"edits": records})
    assert [e["action"] for e in edits] == ["delete", "create", "update"]
    undone = apply_edits(store, edits, baseline)
    assert all(r["applied"] for r in undone), undone
    assert store.get("memory", "new") is None
    fact, units = store.get("memory", "fact"), store.get("prompt", "units")
    assert _content(fact) == _content(original["fact"])
    assert _content(units) == _content(original["units"])
    assert fact.version == 3  # created 1, refined 2, rolled back 3
    assert units.version == 2
    assert fact.created_at == original["fact"]["created_at"]


def test_rollback_leaves_an_entry_changed_since_the_refinement_alone(store: HarnessStore) -> None:
    store.create("memory", {"title": "fact", "content": "original"})
    records = _apply(
        store, [{"action": "update", "kind": "memory", "id": "fact", "content": "refined"}]
    )
    store.update("memory", "fact", {"content": "the agent's later edit"})
    edits, baseline = rollback_edits({"edits": records})
    (undone,) = apply_edits(store, edits, baseline, "changed since the refinement")
    assert undone["applied"] is False and "changed since the refinement" in undone["error"]
    assert store.get("memory", "fact").content == "the agent's later edit"


def test_rollback_of_an_entry_deleted_since_the_refinement_says_it_changed(
    store: HarnessStore,
) -> None:
    store.create("memory", {"title": "fact", "content": "original"})
    records = _apply(
        store, [{"action": "update", "kind": "memory", "id": "fact", "content": "refined"}]
    )
    store.delete("memory", "fact")
    edits, baseline = rollback_edits({"edits": records})
    (undone,) = apply_edits(store, edits, baseline, "changed since the refinement")
    assert undone["applied"] is False and "changed since the refinement" in undone["error"]
    assert store.get("memory", "fact") is None


def test_an_entry_deleted_during_planning_is_reported_as_changed(store: HarnessStore) -> None:
    store.create("memory", {"title": "fact", "content": "planned on this"})
    baseline = baseline_of(store.read())
    store.delete("memory", "fact")
    (record,) = apply_edits(
        store,
        [{"action": "update", "kind": "memory", "id": "fact", "content": "refined"}],
        baseline,
    )
    assert record["applied"] is False and "changed during planning" in record["error"]
    assert store.get("memory", "fact") is None


def test_rollback_skips_the_edits_that_were_rejected(store: HarnessStore) -> None:
    records = _apply(
        store,
        [
            {"action": "update", "kind": "memory", "id": "missing", "content": "c"},
            {"action": "create", "kind": "memory", "title": "fact", "content": "c"},
        ],
    )
    edits, _ = rollback_edits({"edits": records})
    assert edits == [{"action": "delete", "kind": "memory", "id": "fact"}]
