"""The step-through of a saved session (docs/teaching.md): its steps as the model saw them, with
the sub-agents each cell spawned, read from the log whether the session is loaded or not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_agent_lab.core.observation import CUT_MARKER, cap_text
from prime_agent_lab.core.sessions import SessionLog, SessionRepository
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.core.steps import session_steps
from prime_agent_lab.headless import HeadlessRun
from tests.conftest import run_turn, use_script
from tests.test_subagents import CHILD, WAIT_FOR_CHILDREN, run_tree, write_script

SPAWN_AND_FLOOD = 'a = await rlm("alpha words", name="alpha")\nprint("x" * 500)\nprint("end")'
TREE = [
    {"text": "Spawning alpha.", "code": SPAWN_AND_FLOOD},
    {"code": WAIT_FOR_CHILDREN},
    {"text": "children: {last_output_line}"},
]
OUTPUT_CAP = 120


async def run_headless_tree(cwd: Path, script: str) -> str:
    """Runs the tree to its end in `cwd` (its sessions under `.prime-agent/`); the root's id."""
    run = HeadlessRun(
        cwd=cwd,
        notebook="analysis.ipynb",
        provider="scripted",
        model=None,
        script_path=script,
        stream=False,
        kernel_name="python3",
        settings=Settings(cell_timeout=60, output_cap=OUTPUT_CAP),
    )
    outcome, _ = await run_tree(run, "fan out")
    assert outcome.stop_reason == "end_turn", outcome
    return run.agent.session_id


def check_tree_steps(root: Any, child_steps: Any, logged: list[dict[str, Any]]) -> None:
    """The root's three steps and the child's two, as the model read them."""
    steps = root["steps"]
    assert [s["index"] for s in steps] == [0, 1, 2]
    first, waiting, answer = steps
    assert first["user_message"] == "fan out" and first["user_from"] is None
    assert first["text"] == "Spawning alpha." and first["code"] == SPAWN_AND_FLOOD
    assert [c["name"] for c in first["children"]] == ["alpha"]
    assert waiting["children"] == [] and waiting["code"] == WAIT_FOR_CHILDREN
    # The observation is the logged one, byte for byte, cut marker included.
    results = [e for e in logged if e["type"] == "tool_result"]
    assert [s["observation"] for s in steps[:2]] == [r["observation"] for r in results]
    cut = first["observation"].splitlines()
    assert len(first["cut_lines"]) == 1
    assert "characters cut here" in cut[first["cut_lines"][0]]
    assert "end" in cut[first["cut_lines"][0] :]  # the tail is kept after the marker
    assert waiting["cut_lines"] == []
    assert answer["code"] is None and answer["observation"] is None
    assert answer["text"] == "children: [('alpha', 'completed')]"
    assert first["status"] == "ok" and first["cell_id"] and first["execution_count"] is not None
    assert first["usage"] and first["usage"]["output_tokens"] > 0
    assert first["cell_seconds"] is not None and first["cell_seconds"] >= 0
    assert first["answered_at"] <= first["finished_at"]
    assert child_steps["parent_session_id"] == root["session_id"]
    assert child_steps["name"] == "alpha"
    assert child_steps["notebook_path"] == "analysis.agents/alpha.ipynb"
    child_first, child_answer = child_steps["steps"]
    assert child_first["user_message"].endswith("\nalpha words")  # as the child read it
    assert child_first["user_from"]
    assert child_first["code"] == 'found = "alpha words".upper()\nprint(found)'
    assert child_first["observation"].endswith("ALPHA WORDS")
    assert child_answer["text"] == "did alpha words"


async def test_steps_show_each_cell_as_the_model_saw_it_and_the_sub_agent_it_spawned(
    tmp_path: Path,
) -> None:
    root_id = await run_headless_tree(tmp_path, write_script(tmp_path, TREE, CHILD))

    # Read back from disk after the run ended: nothing is loaded any more.
    repository = SessionRepository(tmp_path / ".prime-agent" / "sessions")
    root = session_steps(repository.read(root_id))
    child_id = root["steps"][0]["children"][0]["session_id"]
    child = session_steps(repository.read(child_id))

    check_tree_steps(root, child, repository.read(root_id).path())


async def test_steps_route_reads_a_tree_saved_before_the_server_started(
    jp_fetch: Any, jp_root_dir: Path, host: Any, tmp_path: Path
) -> None:
    """A tree run by another process (a CLI run, an earlier server) opens from disk."""
    root_id = await run_headless_tree(jp_root_dir, write_script(tmp_path, TREE, CHILD))
    assert root_id not in host.agents

    root = json.loads((await jp_fetch("prime-agent", "api", "sessions", root_id, "steps")).body)
    child_id = root["steps"][0]["children"][0]["session_id"]
    child = json.loads((await jp_fetch("prime-agent", "api", "sessions", child_id, "steps")).body)

    check_tree_steps(root, child, host.repository.read(root_id).path())
    assert not host.agents  # reading steps loads no agent


async def test_steps_route_of_a_loaded_session_and_of_an_unknown_one(
    jp_fetch: Any, host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    use_script(host, write_script(tmp_path, TREE, CHILD), output_cap=OUTPUT_CAP)
    parent = await host.attach(make_notebook("analysis.ipynb"))
    ended = await run_turn(host, parent.session_id, "fan out")
    assert ended["final_text"] == "children: [('alpha', 'completed')]"

    root = json.loads(
        (await jp_fetch("prime-agent", "api", "sessions", parent.session_id, "steps")).body
    )
    child_id = root["steps"][0]["children"][0]["session_id"]
    assert child_id in host.agents  # the child is loaded too
    child = json.loads((await jp_fetch("prime-agent", "api", "sessions", child_id, "steps")).body)
    check_tree_steps(root, child, parent.session.path())

    missing = await jp_fetch(
        "prime-agent", "api", "sessions", "20990101-000000-abcdef", "steps", raise_error=False
    )
    assert missing.code == 404
    assert "no session" in json.loads(missing.body)["message"]


def _call(call_id: str, code: str) -> dict[str, str]:
    return {"id": call_id, "name": "python", "arguments": json.dumps({"code": code})}


def _logged_by_hand(tmp_path: Path) -> SessionLog:
    """One turn: an answer with two cells (the first spawns a child, logged without
    `spawn_cell_id` as older logs are), another agent's message, then an ask-mode edit."""
    log = SessionRepository(tmp_path / "sessions").create(
        notebook_path="a.ipynb", provider="scripted", model="demo"
    )
    log.append("user_message", text="split it", turn=1)
    calls = [_call("c1", 'await rlm("half", name="h")'), _call("c2", "print(2)")]
    log.append("assistant_message", text="Two cells.", tool_calls=calls, turn=1)
    log.append("cell_started", tool_call_id="c1", cell_id="cell-1", turn=1)
    log.append("child_spawned", rlm_child_id="20260101-000000-abcdef", name="h", task="half")
    log.append("tool_result", tool_call_id="c1", cell_id="cell-1", observation="spawned", turn=1)
    log.append("cell_started", tool_call_id="c2", cell_id="cell-2", turn=1)
    log.append("tool_result", tool_call_id="c2", cell_id="cell-2", observation="2", turn=1)
    log.append("agent_message", text='[message from child "h"]\nDone.', turn=1)
    log.append("assistant_message", text="", tool_calls=[_call("c3", "x = 1")], turn=1)
    log.append("cell_approval", tool_call_id="c3", decision="edit", code="x = 2", turn=1)
    log.append("tool_result", tool_call_id="c3", cell_id="cell-3", observation="", turn=1)
    log.append("assistant_message", text="Done.", turn=1)
    log.append("turn_end", turn=1, stop_reason="end_turn", final_text="Done.")
    return log


def test_an_answer_with_two_cells_makes_two_steps_and_an_older_spawn_goes_to_its_cell(
    tmp_path: Path,
) -> None:
    steps = session_steps(_logged_by_hand(tmp_path))["steps"]

    assert [(s["call_index"], s["code"], s["observation"]) for s in steps] == [
        (0, 'await rlm("half", name="h")', "spawned"),
        (1, "print(2)", "2"),
        (0, "x = 2", ""),  # what ran: the user's edit
        (0, None, None),
    ]
    assert [s["text"] for s in steps] == ["Two cells.", "", "", "Done."]
    assert [c["session_id"] for c in steps[0]["children"]] == ["20260101-000000-abcdef"]
    assert steps[1]["children"] == []
    assert steps[2]["received"] == ['[message from child "h"]\nDone.']
    assert all(s["user_message"] == "split it" for s in steps)


def test_the_cut_marker_is_the_line_cap_text_writes_and_no_other() -> None:
    where = "the full output is in notebook cell 3f2a-b"
    for size, cap in ((1_000, 10), (12_345_678, 20_000), (50_001, 50_000)):
        text = "\n".join(["[... 1 of 2 characters cut here ...]", "y" * size])
        lines = cap_text(text, cap, where).splitlines()
        assert len([line for line in lines if CUT_MARKER.match(line)]) == 1, (size, cap)
    assert not CUT_MARKER.match("[... 1 of 2 characters cut here ...]")  # a cell's own print


def test_a_damaged_log_gives_the_steps_before_the_damage_and_says_why(tmp_path: Path) -> None:
    log = _logged_by_hand(tmp_path)
    assert session_steps(log)["broken"] is None
    with log.file.open("a", encoding="utf-8") as file:
        file.write("[1, 2]\n")

    read = session_steps(SessionLog.read(log.directory))

    assert len(read["steps"]) == 4
    assert (
        read["broken"] == "session.jsonl: line 15: an array where a record (a JSON object) belongs"
    )


async def test_steps_give_lanes_only_to_the_sessions_own_sub_agents(
    jp_fetch: Any, host: Any
) -> None:
    """A log from elsewhere whose `child_spawned` names the session itself (the step-through
    recursed for ever) or another tree's root gets no lane for it."""
    repo = host.repository
    other = repo.create(notebook_path="other.ipynb", provider="scripted", model="demo")
    log = repo.create(notebook_path="hostile.ipynb", provider="scripted", model="demo")
    log.append("user_message", text="go", turn=1)
    log.append("assistant_message", text="", tool_calls=[_call("c1", "x = 1")], turn=1)
    log.append("cell_started", tool_call_id="c1", cell_id="cell-1", turn=1)
    for target in (log.session_id, other.session_id):
        log.append("child_spawned", rlm_child_id=target, name="self", spawn_cell_id="cell-1")
    log.append("tool_result", tool_call_id="c1", cell_id="cell-1", observation="", turn=1)

    steps = json.loads(
        (await jp_fetch("prime-agent", "api", "sessions", log.session_id, "steps")).body
    )["steps"]
    assert [s["code"] for s in steps] == ["x = 1"]
    assert steps[0]["children"] == []
    assert session_steps(log)["steps"][0]["children"] != []  # the log does name them
