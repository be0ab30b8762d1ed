"""The harness store on its own: CRUD for the four kinds, versions, ids, scopes, the skill
contract, damaged files, and many writers (processes and threads) at once."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.harness.store import (
    KINDS,
    Harness,
    HarnessError,
    HarnessStore,
    check_skill_contract,
)
from prime_agent_lab.core.harness.summary import harness_section
from prime_agent_lab.core.harness_ops import harness_state

SKILL = {
    "reference": {"type": "python", "import": "statistics", "callable": "mean"},
    "arguments": {"data": "list of numbers"},
}


def fields_for(kind: str, title: str, content: str) -> dict[str, Any]:
    extra = SKILL if kind == "skill" else {}
    return {"title": title, "content": content, **extra}


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_goes_from_version_1_to_2_and_keeps_omitted_fields(
    tmp_path: Path, kind: str
) -> None:
    store = HarnessStore(tmp_path, "local")
    created = store.create(kind, {**fields_for(kind, "Retry flaky test", "retry 3"), "path": "ci"})
    assert (created.id, created.version, created.scope) == ("retry_flaky_test", 1, "local")
    updated = store.update(kind, created.id, {"content": "retry 5"})
    assert (updated.version, updated.content, updated.path, updated.title) == (
        2,
        "retry 5",
        "ci",
        "Retry flaky test",
    )
    assert updated.created_at == created.created_at
    assert store.get(kind, created.id) == updated
    assert store.delete(kind, created.id) == updated
    assert store.get(kind, created.id) is None
    assert json.loads((tmp_path / "harness.json").read_text())["revision"] == 3


def test_create_on_an_existing_id_and_update_or_delete_on_a_missing_one_fail_clearly(
    tmp_path: Path,
) -> None:
    store = HarnessStore(tmp_path, "local")
    store.create("memory", {"title": "units", "content": "metres"})
    with pytest.raises(HarnessError, match="already exists") as exists:
        store.create("memory", {"title": "Units!", "content": "feet"})
    assert exists.value.status == 409
    with pytest.raises(HarnessError, match="no memory with id 'nope'") as missing:
        store.update("memory", "nope", {"content": "x"})
    assert missing.value.status == 404
    with pytest.raises(HarnessError, match="no prompt note"):
        store.delete("prompt", "units")  # the id exists, but as a memory
    assert store.get("memory", "units").content == "metres"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"title": "x", "content": "y", "id": "base_system_prompt"}, "not editable"),
        ({"title": "x", "content": "y", "id": "base-system-prompt"}, "not editable"),
        ({"title": "x", "content": "y", "id": "../../etc"}, "bad id"),
        ({"title": "x", "content": "y", "id": "Upper"}, "bad id"),
        ({"title": "", "content": "y"}, "non-empty title"),
        ({"title": "x", "content": 3}, "content must be a string"),
        ({"title": "x", "content": "y", "colour": "red"}, "unknown field"),
        ({"title": "x", "content": "y", "metadata": {"f": object()}}, "plain JSON"),
        ({"title": "x", "content": "y" * 100_001}, "longer than"),
    ],
)
def test_bad_fields_are_refused_and_nothing_is_written(
    tmp_path: Path, fields: dict[str, Any], error: str
) -> None:
    store = HarnessStore(tmp_path, "local")
    with pytest.raises(HarnessError, match=error):
        store.create("prompt", fields)
    assert not (tmp_path / "harness.json").exists()


def test_an_unknown_kind_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="unknown kind 'note'"):
        HarnessStore(tmp_path, "local").create("note", {"title": "x", "content": "y"})


@pytest.mark.parametrize(
    ("reference", "arguments", "error"),
    [
        ({"import": "statistics", "callable": "mean"}, {}, 'type must be "python"'),
        ({"type": "shell", "import": "statistics", "callable": "mean"}, {}, "python"),
        ({"type": "python", "callable": "mean"}, {}, "importable module"),
        ({"type": "python", "import": "statistics"}, {}, "name of a callable"),
        ({"type": "python", "import": "a b", "callable": "mean"}, {}, "importable module"),
        ({"type": "python", "import": "statistics", "callable": "mean"}, None, "arguments"),
        ({"type": "python", "import": "json", "callable": "f", "source": "x=1"}, {}, "taken"),
        ({"type": "python", "import": "mine", "callable": "f", "source": "def ("}, {}, "compile"),
    ],
)
def test_the_skill_contract_rejects_a_reference_without_type_import_or_callable(
    reference: dict[str, Any], arguments: Any, error: str
) -> None:
    with pytest.raises(HarnessError, match=error):
        check_skill_contract(reference, arguments)


def test_a_skill_update_cannot_break_its_contract(tmp_path: Path) -> None:
    store = HarnessStore(tmp_path, "local")
    store.create("skill", fields_for("skill", "mean", "average"))
    with pytest.raises(HarnessError, match="importable module"):
        store.update("skill", "mean", {"reference": {"type": "python", "callable": "mean"}})
    assert store.get("skill", "mean").version == 1  # type: ignore[union-attr]


def test_a_skill_that_brings_its_module_writes_it_and_removes_it_with_the_skill(
    tmp_path: Path,
) -> None:
    store = HarnessStore(tmp_path, "local")
    reference = {"type": "python", "import": "fit_tools", "callable": "fit"}
    source = "def fit(x):\n    return x\n"
    store.create(
        "skill",
        {"title": "fit", "content": "fit", "reference": {**reference, "source": source}},
    )
    module = tmp_path / "skills" / "fit_tools.py"
    assert module.read_text() == source
    store.update("skill", "fit", {"reference": {**reference, "source": "def fit(x): return 2\n"}})
    assert "return 2" in module.read_text()
    with pytest.raises(HarnessError, match="already brought by skill 'fit'"):
        store.create(
            "skill",
            {"title": "other", "content": "x", "reference": {**reference, "source": source}},
        )
    store.delete("skill", "fit")
    assert not module.exists()


def test_scopes_route_by_flag_and_by_prefix(tmp_path: Path) -> None:
    harness = Harness(HarnessStore(tmp_path / "l", "local"), HarnessStore(tmp_path / "g", "global"))
    harness.store(global_=True).create("memory", {"title": "style", "content": "global one"})
    harness.store().create("memory", {"title": "style", "content": "local one"})
    assert harness.get("memory", "style").content == "local one"  # type: ignore[union-attr]
    assert harness.get("memory", "global:style").content == "global one"  # type: ignore[union-attr]
    store, bare = harness.route("global:style")
    assert (store.scope, bare) == ("global", "style")
    assert [e.scope for e in harness.list("memory")] == ["local", "global"]
    assert harness.version() == {"local": 1, "global": 1}
    no_local = Harness(None, HarnessStore(tmp_path / "g", "global"))
    with pytest.raises(HarnessError, match="global_=True"):
        no_local.store()


def test_a_damaged_file_is_never_overwritten_and_the_error_names_it(tmp_path: Path) -> None:
    store = HarnessStore(tmp_path, "local")
    store.create("memory", {"title": "a", "content": "b"})
    (tmp_path / "harness.json").write_text('{"schema": 1, "entries": {"memory": {')
    with pytest.raises(HarnessError, match=r"harness\.json is damaged") as error:
        store.create("memory", {"title": "c", "content": "d"})
    assert error.value.status == 500
    assert (tmp_path / "harness.json").read_text() == '{"schema": 1, "entries": {"memory": {'


def test_a_damaged_global_file_hides_neither_local_entries_nor_the_prompt(tmp_path: Path) -> None:
    harness = Harness(HarnessStore(tmp_path / "l", "local"), HarnessStore(tmp_path / "g", "global"))
    harness.store().create("memory", {"title": "units", "content": "report metres"})
    harness.store(global_=True).create("memory", {"title": "style", "content": "terse"})
    (tmp_path / "g" / "harness.json").write_text("{not json")

    assert [e.id for e in harness.list()] == ["units"]
    [reason] = harness.read_all()[1]
    assert "harness.json is damaged" in reason and str(tmp_path / "g") in reason
    assert harness.version() == {"local": 1, "global": -1}
    section = harness_section(harness)
    assert "[local:units] units: report metres" in section
    assert "Unavailable: the harness file" in section and "terse" not in section


def test_an_entry_with_a_bad_field_is_dropped_from_reads_and_reported(tmp_path: Path) -> None:
    store = HarnessStore(tmp_path, "local")
    store.create("memory", {"title": "good", "content": "kept"})
    data = json.loads((tmp_path / "harness.json").read_text())
    data["entries"]["memory"]["bad"] = {"id": "bad", "kind": "memory", "title": 3, "content": ""}
    (tmp_path / "harness.json").write_text(json.dumps(data))
    state = store.read()
    assert [e.id for e in state.all()] == ["good"]
    assert any("'bad' ignored" in p for p in state.problems)


def test_malformed_refinement_lines_are_skipped_and_reported(tmp_path: Path) -> None:
    store = HarnessStore(tmp_path, "local")
    store.append_refinement({"id": "refine_1", "edits": []})
    with open(tmp_path / "refinements.jsonl", "a", encoding="utf-8") as handle:
        handle.write('garbage\n{"half": \n[1, 2]\n')
    store.append_refinement({"id": "refine_2", "edits": []})
    assert [r["id"] for r in store.refinements()] == ["refine_1", "refine_2"]
    problems = harness_state(Harness(store, HarnessStore(tmp_path / "g", "global")))["problems"]
    assert any("refinements.jsonl" in p and "3 unreadable line" in p for p in problems), problems


# ---------------------------------------------------------------- many writers at once

WRITES = 200


def write_many(directory: str, writer: str, writes: int = WRITES) -> None:
    """Half creates of new entries, half updates of the writer's own counter."""
    store = HarnessStore(directory, "global")
    store.create("memory", {"id": writer, "title": writer, "content": "start"})
    for i in range(writes):
        if i % 2 == 0:
            store.create("memory", {"id": f"{writer}-{i}", "title": "n", "content": str(i)})
        else:
            store.update("memory", writer, {"content": str(i)})


def test_two_processes_and_a_thread_writing_200_times_each_lose_nothing_and_never_tear(
    tmp_path: Path,
) -> None:
    path = tmp_path / "harness.json"
    reads, revisions, failures = 0, [0], []
    done = threading.Event()

    def read_loop() -> None:
        nonlocal reads
        while not done.is_set():
            try:
                data = json.loads(path.read_bytes())
            except FileNotFoundError:
                continue
            except ValueError as exc:  # a torn file
                failures.append(str(exc))
                continue
            reads += 1
            revisions.append(data["revision"])

    reader = threading.Thread(target=read_loop)
    reader.start()
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=write_many, args=(str(tmp_path), name)) for name in ("p1", "p2")
    ]
    for process in processes:
        process.start()
    write_many(str(tmp_path), "host")
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    done.set()
    reader.join()

    assert failures == []
    assert reads > 0
    assert revisions == sorted(revisions)  # a reader never sees the store go back
    state = HarnessStore(tmp_path, "global").read()
    for writer in ("host", "p1", "p2"):
        counter = state.get("memory", writer)
        assert counter is not None
        assert (counter.version, counter.content) == (WRITES // 2 + 1, str(WRITES - 1))
        created = [e for e in state.all("memory") if e.id.startswith(f"{writer}-")]
        assert len(created) == WRITES // 2
    assert state.revision == 3 * (WRITES + 1)
    assert list(tmp_path.glob(".harness.json.*.tmp")) == []


# ---------------------------------------------------------------- the prompt section


@pytest.fixture
def ticking_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each write a second after the one before (writes in a loop share a millisecond)."""
    ticks = iter(range(3600))

    def now() -> str:
        tick = next(ticks)
        return f"2026-12-01T00:{tick // 60:02d}:{tick % 60:02d}.000Z"

    monkeypatch.setattr("prime_agent_lab.core.harness.store.now_iso", now)


@pytest.mark.usefixtures("ticking_clock")
def test_the_prompt_shows_6_of_8_long_memories_cut_short_with_plus_2_more(tmp_path: Path) -> None:
    harness = Harness(HarnessStore(tmp_path / "l", "local"), HarnessStore(tmp_path / "g", "global"))
    bodies = [f"memory number {i} " + "detail " * 80 for i in range(8)]
    for i, body in enumerate(bodies):
        assert len(body) >= 500
        harness.store().create("memory", {"title": f"m{i}", "content": body})
    section = harness_section(harness)
    lines = [line for line in section.splitlines() if line.startswith("- [local:m")]
    assert len(lines) == 6
    assert all(len(line) <= 182 for line in lines)
    assert '+2 more: rlm.harness.list("memory")' in section
    assert not any(body.strip() in section for body in bodies)
    # the six written last are shown, newest first
    assert "memory number 0" not in section and "memory number 1" not in section
    assert lines[0].startswith("- [local:m7]") and lines[-1].startswith("- [local:m2]")


@pytest.mark.usefixtures("ticking_clock")
def test_the_prompt_shows_local_entries_first_then_the_most_recently_updated(
    tmp_path: Path,
) -> None:
    harness = Harness(HarnessStore(tmp_path / "l", "local"), HarnessStore(tmp_path / "g", "global"))
    for i in range(8):
        harness.store().create("memory", {"title": f"m{i}", "content": f"local {i}"})
    for i in range(3):  # newer than every local entry, but another session's
        harness.store(global_=True).create("memory", {"title": f"g{i}", "content": f"global {i}"})
    harness.store().update("memory", "m0", {"content": "local 0, revised"})
    section = harness_section(harness)
    shown = [line.split("]")[0][3:] for line in section.splitlines() if line.startswith("- [")]
    assert shown == ["local:m0", "local:m7", "local:m6", "local:m5", "local:m4", "local:m3"]
    assert '+5 more: rlm.harness.list("memory")' in section


def test_a_skill_shows_its_call_and_first_line_never_its_module(tmp_path: Path) -> None:
    harness = Harness(HarnessStore(tmp_path / "l", "local"), HarnessStore(tmp_path / "g", "global"))
    harness.store().create(
        "skill",
        {
            "title": "fit curve",
            "content": "Fit a polynomial to points.\nLong explanation " + "z" * 300,
            "reference": {
                "type": "python",
                "import": "fit_tools",
                "callable": "fit",
                "source": "SECRET_MODULE_TEXT = 1\ndef fit(x, y, degree=2):\n    return 0\n",
            },
            "arguments": {"x": "list", "y": "list", "degree": "int"},
        },
    )
    section = harness_section(harness)
    assert "fit_tools.fit(x, y, degree): Fit a polynomial to points." in section
    assert "SECRET_MODULE_TEXT" not in section and "zzzz" not in section
    assert "Harness version: local 1, global 0" in section
