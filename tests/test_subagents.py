"""Sub-agents (`rlm`) through the agent-tree runtime, headless: notebooks, kernels, registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat

from prime_agent_lab.core.agent import AgentConfig
from prime_agent_lab.core.events import Event
from prime_agent_lab.headless import HeadlessRun

WAIT_FOR_CHILDREN = (
    "import asyncio, time\n"
    "deadline = time.time() + 60\n"
    "while time.time() < deadline:\n"
    "    subs = await rlm.list_subagents()\n"
    "    if subs and all(s.status in ('completed', 'replied', 'error') for s in subs):\n"
    "        break\n"
    "    await asyncio.sleep(0.05)\n"
    "print(sorted((s.name, s.status) for s in subs))"
)

CHILD = {
    "turns": [
        {"code": 'found = "{task}".upper()\nprint(found)'},
        {"text": "did {task}"},
    ]
}


def write_script(tmp_path: Path, turns: list[dict[str, Any]], child: dict[str, Any]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns, "child": child}), encoding="utf-8")
    return str(path)


def headless(tmp_path: Path, script: str, **options: Any) -> HeadlessRun:
    return HeadlessRun(
        cwd=tmp_path,
        notebook="analysis.ipynb",
        provider="scripted",
        model=None,
        script=script,
        stream=False,
        kernel_name="python3",
        config=AgentConfig(cell_timeout=60),
        **options,
    )


async def run_tree(run: HeadlessRun, prompt: str) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    await run.start(events.append)
    try:
        outcome = await run.settle(await run.agent.run_turn(prompt))
    finally:
        await run.close()
    return outcome, events


async def test_two_children_get_their_own_linked_notebooks_kernels_and_sessions(
    tmp_path: Path,
) -> None:
    spawn = (
        'a = await rlm("alpha words", name="alpha")\n'
        'b = await rlm("beta words", name="beta")\n'
        "print(a.name, a.notebook_path, b.notebook_path)"
    )
    script = write_script(
        tmp_path,
        [{"code": spawn}, {"code": WAIT_FOR_CHILDREN}, {"text": "children: {last_output_line}"}],
        CHILD,
    )
    run = headless(tmp_path, script)

    outcome, events = await run_tree(run, "fan out")

    assert outcome.stop_reason == "end_turn", outcome
    assert outcome.final_text == "children: [('alpha', 'completed'), ('beta', 'completed')]"
    for name, task in (("alpha", "alpha words"), ("beta", "beta words")):
        path = tmp_path / "analysis.agents" / f"{name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        backlink = nb.cells[0]
        assert backlink.cell_type == "markdown"
        assert "[analysis.ipynb](../analysis.ipynb)" in backlink.source
        assert f"> {task}" in backlink.source
        code_cells = [c for c in nb.cells if c.cell_type == "code"]
        assert code_cells[0].outputs[0]["text"] == task.upper() + "\n"
    spawned = [e for e in events if e["type"] == "child_spawned"]
    assert [e["name"] for e in spawned] == ["alpha", "beta"]
    notices = [e for e in events if e["type"] == "notice" and e["kind"] == "child_completed"]
    assert sorted(n["text"].split("'")[1] for n in notices) == ["alpha", "beta"]
    parent_nb = nbformat.read(tmp_path / "analysis.ipynb", as_version=4)
    links = [
        o
        for o in parent_nb.cells[0].outputs
        if o.get("metadata", {}).get("prime_agent", {}).get("role") == "subagent_link"
    ]
    assert [o["metadata"]["prime_agent"]["path"] for o in links] == [
        "analysis.agents/alpha.ipynb",
        "analysis.agents/beta.ipynb",
    ]
