"""A sub-agent that still works is not deleted, and the refusal says why and what to do: the same
words from the kernel (`rlm.delete_subagent`) and the Agents View (REST), one declaration
(`runtime.not_deleted_text`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_agent_lab.core.runtime import not_deleted_text
from prime_agent_lab.core.settings import Settings
from prime_agent_lab.headless import HeadlessRun

from .test_subagents import WAIT_FOR_CHILDREN, printed_json, run_tree


def tree_script(started: Path, mid_waits_in_its_cell: bool = True) -> dict[str, Any]:
    """The root spawns `mid`, which spawns the slow `leaf` and waits for it in its cell (or,
    `mid_waits_in_its_cell` false, ends its turn at once); once `leaf` runs (it creates
    `started`: kernels run in their own notebook's folder), the root deletes `mid`."""
    leaf = {
        "turns": [
            {"code": f"open({str(started)!r}, 'w').close()\nimport time\ntime.sleep(2)"},
            {"text": "leaf done"},
        ]
    }
    spawn = 'leaf = await rlm("slow work", name="leaf")'
    mid = {
        "turns": [
            {"code": spawn + ("\n" + WAIT_FOR_CHILDREN if mid_waits_in_its_cell else "")},
            {"text": "mid done"},
        ],
        "children": {"leaf": leaf},
    }
    delete_while_leaf_runs = (
        "import json, os, asyncio, time\n"
        "deadline = time.time() + 60\n"
        f"while not os.path.exists({str(started)!r}) and time.time() < deadline:\n"
        "    await asyncio.sleep(0.05)\n"
        "while time.time() < deadline and not all(\n"
        "    s.status in ('completed', 'replied') for s in await rlm.list_subagents()\n"
        f"):\n"
        f"    if {mid_waits_in_its_cell!r}: break\n"
        "    await asyncio.sleep(0.05)\n"
        "out = {}\n"
        "try:\n"
        "    await rlm.delete_subagent('mid')\n"
        "except Exception as exc:\n"
        "    out['refused'] = str(exc)\n"
        + WAIT_FOR_CHILDREN.replace("print(", "out['waited'] = (")
        + "\nprint(json.dumps(out))"
    )
    turns = [
        {"code": 'mid = await rlm("fan out", name="mid")'},
        {"code": delete_while_leaf_runs},
        {"text": "ok"},
    ]
    return {"turns": turns, "children": {"mid": mid}}


def tree_run(tmp_path: Path, mid_waits_in_its_cell: bool) -> HeadlessRun:
    script = tmp_path / "script.json"
    started = tmp_path / "leaf-started"
    script.write_text(json.dumps(tree_script(started, mid_waits_in_its_cell)))
    return HeadlessRun(
        cwd=tmp_path,
        notebook="analysis.ipynb",
        provider="scripted",
        model=None,
        script_path=str(script),
        stream=False,
        kernel_name="python3",
        settings=Settings(cell_timeout=60, max_depth=2),
    )


async def test_deleting_a_sub_agent_whose_cell_waits_for_its_own_says_why_and_what_to_do(
    tmp_path: Path,
) -> None:
    run = tree_run(tmp_path, mid_waits_in_its_cell=True)

    await run_tree(run, "go")

    out = printed_json(run, 1)
    assert out["refused"].endswith(not_deleted_text("mid", "children"))
    assert "waiting for its own sub-agents" in out["refused"]
    assert "Stop subtree" in out["refused"] and "then delete it" in out["refused"]


async def test_a_sub_agent_whose_turn_ended_but_whose_own_sub_agents_run_is_not_deleted(
    tmp_path: Path,
) -> None:
    """Its turn is over (`completed`), its `leaf` still runs: deleting it would leave `leaf`
    without the parent its reply goes to."""
    run = tree_run(tmp_path, mid_waits_in_its_cell=False)

    await run_tree(run, "go")

    out = printed_json(run, 1)
    assert out["refused"].endswith(not_deleted_text("mid", "children"))
    mid = run.runtime.family.children(run.agent.session_id)[0]
    assert not (run.repository.directory(mid.session_id) / "deleted.json").exists()


def test_each_refusal_says_why_and_what_to_do() -> None:
    running = not_deleted_text("slow", "running")
    assert running.startswith("sub-agent 'slow' is running; it was not deleted")
    assert "Stop it first" in running and "Agents View" in running
    assert "mailbox" in not_deleted_text("slow", "mail")
    for working in ("running", "children", "mail"):
        text = not_deleted_text("slow", working)
        assert "it was not deleted" in text and "then delete it." in text
