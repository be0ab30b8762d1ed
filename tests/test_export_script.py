"""`prime-agent-lab export-script`: a recorded session as a script that replays it offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from prime_agent_lab.core.sessions import SessionLog
from prime_agent_lab.export_script import MAX_DEPTH, export_script

from .test_cli import cli, json_lines

SPAWN = 'a = await rlm("alpha words", name="part-a")'
REPLY = "_ = await agent_message.send(f'summary {found}', receiver_role='parent')"
TREE_SCRIPT = {
    "turns": [
        {"text": "Fan out.", "code": SPAWN},
        {"text": "Waiting: {last_output_line}"},
        {"text": "Got {messages}", "code": "print('{messages}'.lower())"},
        {"text": "Done."},
    ],
    "child": {
        "turns": [
            {"text": "Working on {task}.", "code": "found = '{task}'.upper()\nprint(found)"},
            {"code": REPLY},
            {"text": "replied"},
        ]
    },
}


def notebook_cells(path: Path) -> list[dict[str, Any]]:
    """What a reader of the notebook sees: each cell's kind, source, count and outputs."""
    cells = nbformat.read(path, as_version=4).cells
    return [
        {
            "type": c.cell_type,
            "source": c.source,
            "count": c.get("execution_count"),
            "outputs": c.get("outputs"),
        }
        for c in cells
    ]


def run_scripted(folder: Path, script: dict[str, Any]) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.json").write_text(json.dumps(script))
    done = cli(folder, "run", "--mode", "json", "--script", "script.json", "go")
    assert done.returncode == 0, done.stderr
    return json_lines(done.stdout)[-1]


def test_an_exported_session_replays_with_the_same_cells_and_outputs_in_a_fresh_folder(
    tmp_path: Path,
) -> None:
    recorded = tmp_path / "recorded"
    end = run_scripted(recorded, TREE_SCRIPT)
    session_id = Path(end["session_dir"]).name

    exported = cli(recorded, "export-script", session_id, "-o", "replay.json")
    assert exported.returncode == 0, exported.stderr
    script = json.loads((recorded / "replay.json").read_text())
    assert list(script["children"]) == ["part-a"]

    replayed = tmp_path / "replayed"
    again = run_scripted(replayed, script)
    assert again["final_text"] == end["final_text"] == "Done."
    for notebook in ("agent.ipynb", "agent.agents/part-a.ipynb"):
        before = notebook_cells(recorded / notebook)
        assert len(before) >= 2
        assert notebook_cells(replayed / notebook) == before
    assert "summary alpha words" in str(notebook_cells(replayed / "agent.ipynb"))


def test_export_script_takes_a_session_folder_and_prints_to_stdout(tmp_path: Path) -> None:
    end = run_scripted(tmp_path, {"turns": [{"code": "print(1)"}, {"text": "ok"}]})
    done = cli(tmp_path, "export-script", end["session_dir"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["turns"] == [{"code": "print(1)"}, {"text": "ok"}]


def test_export_script_of_an_unknown_session_is_one_clear_line(tmp_path: Path) -> None:
    done = cli(tmp_path, "export-script", "20990101-000000-abcdef")
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("prime-agent-lab export-script: no session '20990101-000000-abcdef'")


def recorded_session(folder: Path, *entries: dict[str, Any]) -> Path:
    """A session whose first entry is the user's `go` (id "first"), then `entries`."""
    log = SessionLog.create(
        folder / "20260101-000000-abcdef",
        {"session_id": "20260101-000000-abcdef", "notebook_path": "a.ipynb"},
    )
    first = log.append("user_message", text="go", turn=1)["id"]
    for entry in entries:
        kept = entry.get("first_kept_entry_id")
        log.append(**{**entry, **({"first_kept_entry_id": first} if kept == "first" else {})})
    return log.directory


def test_keys_in_a_session_never_reach_the_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    folder = recorded_session(
        tmp_path,
        {
            "entry_type": "assistant_message",
            "turn": 1,
            "text": f"the key is {key}",
            "tool_calls": [{"id": "c1", "name": "python", "arguments": json.dumps({"code": key})}],
        },
    )
    script = export_script(folder)
    assert key not in json.dumps(script)
    assert script["turns"][0]["code"] == "[redacted]"


def test_recorded_text_that_looks_like_a_template_is_replayed_as_written(tmp_path: Path) -> None:
    folder = recorded_session(
        tmp_path,
        {"entry_type": "assistant_message", "turn": 1, "text": "f'{task}' is a format string"},
    )
    [step] = export_script(folder)["turns"]
    assert step == {"text": "f'{task}' is a format string", "verbatim": True}


def test_recorded_side_calls_are_exported_as_the_answers_they_were(tmp_path: Path) -> None:
    edit = {
        "action": "create",
        "kind": "memory",
        "id": "plots",
        "applied": True,
        "before": None,
        "after": {"id": "plots", "title": "Plots", "content": "use plt", "scope": "local"},
    }
    folder = recorded_session(
        tmp_path,
        {
            "entry_type": "compaction",
            "turn": 1,
            "summary": "## Goal\nplot",
            "first_kept_entry_id": "first",
        },
        {
            "entry_type": "kernel_gc",
            "turn": 1,
            "text": "deleted big",
            "actions": [{"name": "big", "action": "delete", "reason": "old"}],
        },
        {"entry_type": "refine_review", "should_refine": True, "rationale": "learnt"},
        {
            "entry_type": "refinement",
            "turn": 1,
            "text": "[refinement r1]",
            "refinement": {"id": "r1", "trigger": "user", "summary": "s", "edits": [edit]},
        },
    )
    side = export_script(folder)["side"]
    assert side["summary"] == [{"text": "## Goal\nplot"}]
    gc = json.loads(side["kernel_gc"][0]["text"])
    assert gc == {"actions": [{"name": "big", "action": "delete", "reason": "old"}]}
    assert json.loads(side["refine_review"][0]["text"]) == {
        "should_refine": True,
        "rationale": "learnt",
    }
    proposal = json.loads(side["refine"][0]["text"])
    assert proposal["edits"] == [
        {
            "action": "create",
            "kind": "memory",
            "id": "plots",
            "title": "Plots",
            "content": "use plt",
        }
    ]


def test_a_damaged_log_exports_what_could_be_read_and_says_where_it_stopped(
    tmp_path: Path,
) -> None:
    folder = recorded_session(
        tmp_path, {"entry_type": "assistant_message", "turn": 1, "text": "read me"}
    )
    with (folder / "session.jsonl").open("a") as log:
        log.write("[1, 2]\n")
    script = export_script(folder)
    assert script["turns"] == [{"text": "read me"}]
    assert "line 4" in script["exported_from"]["damage"]


COMPACTING_SCRIPT = {
    "turns": [
        {"code": "big = 'x' * 200_000\nfor i in range(8):\n    print(big[:12_000])"},
        {"code": "r = await compact.run()\nprint(r['scheduled'])"},
        {"code": "print('compacted')"},
        {"text": "Done."},
    ],
    "side": {
        "kernel_gc": [
            {"text": json.dumps({"actions": [{"name": "big", "action": "delete", "reason": "r"}]})}
        ]
    },
}


def session_of(folder: Path, end: dict[str, Any], entry_type: str) -> list[dict[str, Any]]:
    lines = (folder / end["session_dir"] / "session.jsonl").read_text().splitlines()[1:]
    return [e for e in map(json.loads, lines) if e["type"] == entry_type]


def test_a_replayed_export_compacts_and_cleans_up_the_kernel_as_the_session_did(
    tmp_path: Path,
) -> None:
    recorded = tmp_path / "recorded"
    end = run_scripted(recorded, COMPACTING_SCRIPT)
    exported = cli(recorded, "export-script", Path(end["session_dir"]).name, "-o", "replay.json")
    assert exported.returncode == 0, exported.stderr
    script = json.loads((recorded / "replay.json").read_text())
    assert set(script["side"]) >= {"summary", "kernel_gc"}

    replayed = tmp_path / "replayed"
    again = run_scripted(replayed, script)
    for kind, field in (("compaction", "summary"), ("kernel_gc", "deleted")):
        before = [e[field] for e in session_of(recorded, end, kind)]
        assert before and [e[field] for e in session_of(replayed, again, kind)] == before
    assert notebook_cells(replayed / "agent.ipynb") == notebook_cells(recorded / "agent.ipynb")


def test_a_crafted_chain_of_sub_agents_deeper_than_any_tree_exports_without_a_crash(
    tmp_path: Path,
) -> None:
    """700 sessions, each naming the next as its sub-agent (a clone can hold anything): the
    export stops at MAX_DEPTH with a note instead of exhausting the recursion."""
    root = tmp_path / ".prime-agent" / "sessions"
    ids = [f"20260101-000000-{i:06x}" for i in range(700)]
    for index, session_id in enumerate(ids):
        log = SessionLog.create(
            root / session_id, {"session_id": session_id, "notebook_path": f"n{index}.ipynb"}
        )
        log.append("user_message", text="go", turn=1)
        if index + 1 < len(ids):
            log.append("child_spawned", turn=1, rlm_child_id=ids[index + 1], name=f"c{index + 1}")

    script = export_script(root / ids[0])

    depth, level = 0, script
    while level.get("children"):
        (level,) = level["children"].values()
        depth += 1
    assert depth == MAX_DEPTH + 1 and "deeper than" in level["missing"]
    json.dumps(script)  # the whole script serializes
