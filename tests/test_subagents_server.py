"""Sub-agents on the server: live child notebooks, pooled Jupyter-session kernels, the registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat

from prime_agent_lab.core.blank_cell import is_blank_code_cell
from prime_agent_lab.core.transcript import chat_transcript
from tests.conftest import next_event, read_saved_notebook, run_turn, use_script, wait_for
from tests.test_subagents import CHILD, DIES_ONCE_THEN_SAYS_WHERE, WAIT_FOR_CHILDREN


def tree_script(tmp_path: Path, turns: list[dict[str, Any]]) -> str:
    path = tmp_path / "tree-script.json"
    path.write_text(json.dumps({"turns": turns, "child": CHILD}), encoding="utf-8")
    return str(path)


async def test_a_child_notebook_is_live_runs_on_its_own_jupyter_session_kernel_and_links_back(
    host: Any, jp_serverapp: Any, jp_root_dir: Path, make_notebook: Any, tmp_path: Path
) -> None:
    spawn = 'a = await rlm("alpha words", name="alpha")\nprint(a.notebook_path)'
    use_script(
        host,
        tree_script(
            tmp_path, [{"code": spawn}, {"code": WAIT_FOR_CHILDREN}, {"text": "{last_output_line}"}]
        ),
    )
    parent = await host.attach(make_notebook("work/analysis.ipynb"))

    ended = await run_turn(host, parent.session_id, "fan out")

    assert ended["final_text"] == "[('alpha', 'completed')]"
    child_path = "work/analysis.agents/alpha.ipynb"
    child = next(a for a in host.agents.values() if a.session.notebook_path == child_path)
    assert child.session.header["parent_session_id"] == parent.session_id
    sessions = await jp_serverapp.session_manager.list_sessions()
    kernel_of = {s["path"]: s["kernel"]["id"] for s in sessions}
    assert kernel_of[child_path] == child.kernel.kernel_id
    assert kernel_of[child_path] != kernel_of["work/analysis.ipynb"]

    def saved() -> Any:
        nb = read_saved_notebook(jp_root_dir / child_path)
        return nb if nb is not None and any(c.get("outputs") for c in nb.cells) else None

    nb = await wait_for(saved, timeout=30)
    nbformat.validate(nb)
    assert "[analysis.ipynb](../analysis.ipynb)" in nb.cells[0].source
    assert nb.cells[1].outputs[0]["text"] == "ALPHA WORDS\n"
    # The empty cell for the user stays last, below the child's live cell, and is no agent's.
    assert len(nb.cells) == 3 and is_blank_code_cell(nb.cells[2])
    assert "prime_agent" not in nb.cells[2].metadata
    items = chat_transcript(parent.session, host.runtime.child_state)
    (line,) = [i for i in items if i["type"] == "child"]
    first_cell = next(i for i in items if i["type"] == "cell")
    assert (line["name"], line["status"], line["spawn_cell_id"]) == (
        "alpha",
        "completed",
        first_cell["cell_id"],
    )
    assert line["preview"] == "did alpha words"
    # Opening the child notebook attaches its own agent, not a new one.
    assert (await host.attach(child_path)).session_id == child.session_id


async def test_a_child_notebook_opened_before_its_kernel_is_handed_out_runs_on_the_opened_kernel(
    host: Any, jp_serverapp: Any, make_notebook: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """A user who clicks the child's link at once opens its notebook (JupyterLab starts it a
    Jupyter session) while the pool is still starting the child's kernel: the child runs on
    the kernel the user's tab has, in the parent notebook's folder, instead of failing."""
    child_path = "work/analysis.agents/alpha.ipynb"
    where = {
        "turns": [
            {"code": "import os\nprint(os.path.basename(os.getcwd()))"},
            {"text": "in {last_output_line}"},
        ]
    }
    script = tmp_path / "tree-script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"code": 'a = await rlm("where am I", name="alpha")'},
                    {"code": WAIT_FOR_CHILDREN},
                    {"text": "{last_output_line}"},
                ],
                "child": where,
            }
        ),
        encoding="utf-8",
    )
    use_script(host, str(script))
    parent = await host.attach(make_notebook("work/analysis.ipynb"))
    pool = host.fleet.pool
    take = pool.take
    opened: dict[str, str] = {}

    async def take_while_the_user_opens_the_notebook() -> str:
        kernel_id = await take()
        model = await jp_serverapp.session_manager.create_session(
            path=child_path, name="alpha.ipynb", type="notebook", kernel_name="python3"
        )
        opened["kernel"] = model["kernel"]["id"]
        return kernel_id

    monkeypatch.setattr(pool, "take", take_while_the_user_opens_the_notebook)

    ended = await run_turn(host, parent.session_id, "fan out")

    assert ended["final_text"] == "[('alpha', 'completed')]"
    child = next(a for a in host.agents.values() if a.session.notebook_path == child_path)
    assert child.kernel.kernel_id == opened["kernel"]
    items = chat_transcript(parent.session, host.runtime.child_state)
    (line,) = [i for i in items if i["type"] == "child"]
    assert line["preview"] == "in work"
    sessions = await jp_serverapp.session_manager.list_sessions()
    assert [s["kernel"]["id"] for s in sessions if s["path"] == child_path] == [opened["kernel"]]


async def test_a_child_whose_kernel_restarts_still_works_in_the_parent_notebooks_folder(
    host: Any, make_notebook: Any, tmp_path: Path
) -> None:
    script = tmp_path / "tree-script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"code": 'a = await rlm("die once", name="alpha")'},
                    {"code": WAIT_FOR_CHILDREN},
                    {"text": "{last_output_line}"},
                ],
                "child": DIES_ONCE_THEN_SAYS_WHERE,
            }
        ),
        encoding="utf-8",
    )
    use_script(host, str(script))
    parent = await host.attach(make_notebook("work/analysis.ipynb"))

    ended = await run_turn(host, parent.session_id, "spawn")

    assert ended["final_text"] == "[('alpha', 'completed')]"
    child = next(a for a in host.agents.values() if a.session.header.get("parent_session_id"))
    results = [e for e in child.session.entries if e["type"] == "tool_result"]
    assert results[0]["status"] == "died"
    assert results[1]["observation"].splitlines()[-1] == "work"


async def test_stop_stops_only_that_agent_and_stop_with_tree_stops_its_sub_agents_too(
    host: Any, jp_fetch: Any, make_notebook: Any, tmp_path: Path
) -> None:
    busy = "import time\nopen({flag!r}, 'w').close()\nwhile True:\n    time.sleep(0.05)"
    parent_flag, child_flag = str(tmp_path / "parent.busy"), str(tmp_path / "child.busy")
    script = tmp_path / "stop-tree.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    {"code": "await rlm('wait', name='waiter')\n" + busy.format(flag=parent_flag)},
                    {"text": "stopped"},
                ],
                "child": {"turns": [{"code": busy.format(flag=child_flag)}, {"text": "never"}]},
            }
        ),
        encoding="utf-8",
    )
    use_script(host, str(script))
    parent = await host.attach(make_notebook("stop-tree.ipynb"))
    await host.send(parent.session_id, "go")
    await wait_for(lambda: Path(parent_flag).exists() and Path(child_flag).exists(), timeout=60)
    child = next(a for a in host.agents.values() if a.session_id != parent.session_id)

    async def stop(session_id: str, body: dict[str, Any]) -> Any:
        url = ("prime-agent", "api", "sessions", session_id, "stop")
        response = await jp_fetch(*url, method="POST", body=json.dumps(body))
        return json.loads(response.body)

    assert await stop(parent.session_id, {}) == {"stopped": True}
    await wait_for(lambda: not parent.running)
    assert child.running  # Stop in the parent's panel leaves its sub-agent working

    assert await stop(parent.session_id, {"tree": True}) == {"stopped": True}
    await wait_for(lambda: not child.running)
    end = child.session.path()[-1]
    assert end["type"] == "turn_end" and end["stop_reason"] == "stopped"


async def test_a_users_own_message_to_a_child_sends_its_parent_no_completion_notice(
    host: Any, jp_fetch: Any, make_notebook: Any, tmp_path: Path
) -> None:
    """The user talks to a sub-agent directly (its chat, REST): that turn is not the parent's
    task, so the parent gets no `child_completed` and starts no (paid) turn, and the child's
    status still tells how the parent's task ended (it replied)."""
    spawn = 'a = await rlm("alpha words", name="alpha")\nprint(a.notebook_path)'
    replies = {
        "turns": [
            {"code": 'await agent_message.send("found {task}", receiver_role="parent")'},
            {"text": "did {task}"},
        ]
    }
    script = tmp_path / "reply-script.json"
    turns = [{"code": spawn}, {"code": WAIT_FOR_CHILDREN}, {"text": "{last_output_line}"}]
    script.write_text(json.dumps({"turns": turns, "child": replies}), encoding="utf-8")
    use_script(host, str(script))
    parent = await host.attach(make_notebook("direct/analysis.ipynb"))
    ended = await run_turn(host, parent.session_id, "fan out")
    assert ended["final_text"] == "[('alpha', 'replied')]"
    child = next(a for a in host.agents.values() if a.session.header.get("name") == "alpha")
    parent_turns = parent.session.turns()
    parent_entries = len(parent.session.entries)
    events = parent.events.subscribe()

    response = await jp_fetch(
        "prime-agent", "api", "sessions", child.session_id, "messages",
        method="POST", body=json.dumps({"text": "a question from the user"}),
    )  # fmt: skip
    assert response.code == 202
    assert (await next_event(events, "child_status", timeout=30))["status"] == "running"
    status = await next_event(events, "child_status", timeout=60)  # the user's turn ended

    assert status["status"] == "replied", status
    assert not [e for e in events_so_far(events) if e["type"] == "notice"]
    assert not [e for e in parent.session.entries[parent_entries:] if e["type"] == "notice"]
    assert parent.session.turns() == parent_turns and not parent.running
    assert host.runtime.child_status(child.session_id) == "replied"
    entries = host.runtime.list_children(parent.session_id)
    assert [(e["name"], e["status"]) for e in entries] == [("alpha", "replied")]


def events_so_far(queue: Any) -> list[Any]:
    found = []
    while not queue.empty():
        found.append(queue.get_nowait())
    return found
