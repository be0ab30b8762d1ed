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


def tree_script(started: Path) -> dict[str, Any]:
    """The root spawns `mid`, whose cell spawns `leaf` and waits for it; once `leaf` runs (it
    creates `started`: kernels run in their own notebook's folder), the root deletes `mid`."""
    leaf = {
        "turns": [
            {"code": f"open({str(started)!r}, 'w').close()\nimport time\ntime.sleep(2)"},
            {"text": "leaf done"},
        ]
    }
    mid = {
        "turns": [
            {"code": 'leaf = await rlm("slow work", name="leaf")\n' + WAIT_FOR_CHILDREN},
            {"text": "mid done"},
        ],
        "children": {"leaf": leaf},
    }
    delete_while_mid_waits = (
        "import json, os, asyncio, time\n"
        "deadline = time.time() + 60\n"
        f"while not os.path.exists({str(started)!r}) and time.time() < deadline:\n"
        "    await asyncio.sleep(0.05)\n"
        "out = {}\n"
        "try:\n"
        "    await rlm.delete_subagent('mid')\n"
        "except Exception as exc:\n"
        "    out['refused'] = str(exc)\n"
        + WAIT_FOR_CHILDREN.replace("print(", "out['waited'] = (")
        + "\nout['deleted'] = (await rlm.delete_subagent('mid'))['deleted']\n"
        "print(json.dumps(out))"
    )
    turns = [
        {"code": 'mid = await rlm("fan out", name="mid")'},
        {"code": delete_while_mid_waits},
        {"text": "ok"},
    ]
    return {"turns": turns, "children": {"mid": mid}}


async def test_deleting_a_sub_agent_that_waits_for_its_own_says_why_and_what_to_do(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(tree_script(tmp_path / "leaf-started")))
    run = HeadlessRun(
        cwd=tmp_path,
        notebook="analysis.ipynb",
        provider="scripted",
        model=None,
        script_path=str(script),
        stream=False,
        kernel_name="python3",
        settings=Settings(cell_timeout=60, max_depth=2),
    )

    await run_tree(run, "go")

    out = printed_json(run, 1)
    assert out["refused"].endswith(not_deleted_text("mid", waiting_for_children=True))
    assert "waiting for its own sub-agents" in out["refused"]
    assert "Stop subtree" in out["refused"] and "then delete it" in out["refused"]
    assert out["deleted"] is True


def test_the_refusal_of_a_running_sub_agent_says_what_to_do() -> None:
    text = not_deleted_text("slow", waiting_for_children=False)
    assert text.startswith("sub-agent 'slow' is running; it was not deleted")
    assert "Stop" in text and "Agents View" in text and "then delete it" in text
