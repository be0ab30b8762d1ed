"""Sub-agents (`rlm`) through the agent-tree runtime, headless: notebooks, kernels, registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat

from prime_agent_lab.core.events import Event
from prime_agent_lab.core.settings import Settings
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


def headless(
    tmp_path: Path, script: str, notebook: str = "analysis.ipynb", **options: Any
) -> HeadlessRun:
    return HeadlessRun(
        cwd=tmp_path,
        notebook=notebook,
        provider="scripted",
        model=None,
        script_path=script,
        stream=False,
        kernel_name="python3",
        settings=Settings(cell_timeout=60),
        **options,
    )


def printed_json(run: HeadlessRun, index: int) -> Any:
    """The JSON line a root agent cell printed (the `index`-th cell of the session)."""
    results = [e for e in run.agent.session.entries if e["type"] == "tool_result"]
    lines = results[index]["observation"].splitlines()
    return json.loads(next(line for line in lines if line.startswith("{")))


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
    alpha = [e["status"] for e in events if e["type"] == "child_status" and e["name"] == "alpha"]
    assert alpha == ["running", "completed"]
    entries = run.runtime.list_children(run.agent.session_id)
    assert [(e["name"], e["spawn_turn"]) for e in entries] == [("alpha", 1), ("beta", 1)]
    assert all(e["usage"]["output_tokens"] > 0 for e in entries)
    root_total = run.runtime.tree_usage(run.agent.session_id)["output_tokens"]
    own = sum(e["usage"]["output_tokens"] for e in entries)
    assert root_total > own  # the root's own calls plus its children's
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


REFUSALS = """
import json
tried = {}
for label, kwargs in [
    ("dup", {"name": "alpha"}),
    ("dotdot", {"name": "../x"}),
    ("slash", {"name": "a/b"}),
    ("all", {"name": "all"}),
    ("parent", {"name": "Parent"}),
    ("model", {"name": "m", "model": "nowhere/nothing"}),
    ("empty", {"name": "e", "prompt": "  "}),
]:
    prompt = kwargs.pop("prompt", "some task")
    try:
        await rlm(prompt, **kwargs)
        tried[label] = "admitted"
    except Exception as exc:
        tried[label] = str(exc)
print(json.dumps(tried))
"""


async def test_names_with_paths_reserved_words_duplicates_and_unknown_models_are_refused(
    tmp_path: Path,
) -> None:
    script = write_script(
        tmp_path,
        [
            {"code": 'first = await rlm("alpha words", name="alpha")'},
            {"code": REFUSALS},
            {"code": WAIT_FOR_CHILDREN},
            {"text": "done"},
        ],
        CHILD,
    )
    run = headless(tmp_path, script)

    await run_tree(run, "spawn badly")

    tried = printed_json(run, 1)
    assert "already has a sub-agent named 'alpha'" in tried["dup"]
    assert "may not hold a path" in tried["dotdot"]
    assert "may not hold a path" in tried["slash"]
    assert "'all' is reserved" in tried["all"]
    assert "'Parent' is reserved" in tried["parent"]
    assert "unknown model 'nowhere/nothing'" in tried["model"]
    assert "scripted/" in tried["model"]  # names what is available
    assert "needs a task" in tried["empty"]
    assert [p.name for p in (tmp_path / "analysis.agents").iterdir()] == ["alpha.ipynb"]
    children = [s for s in run.repository.summaries() if s.session_id != run.agent.session_id]
    assert len(children) == 1


async def test_a_child_cannot_spawn_past_the_depth_limit_and_is_told_why(tmp_path: Path) -> None:
    child = {
        "turns": [
            {"code": 'await rlm("grandchild work", name="deeper")'},
            {"text": "tried"},
        ]
    }
    script = write_script(
        tmp_path,
        [
            {"code": 'await rlm("child work", name="kid")'},
            {"code": WAIT_FOR_CHILDREN},
            {"text": "ok"},
        ],
        child,
    )
    run = headless(tmp_path, script)

    await run_tree(run, "go")

    kid = run.runtime.family.children(run.agent.session_id)[0]
    kid_log = run.repository.read(kid.session_id)
    result = next(e for e in kid_log.entries if e["type"] == "tool_result")
    assert result["status"] == "error"
    assert "depth limit is 1 (--max-depth)" in result["observation"]  # a CLI run names its flag
    assert run.runtime.family.children(kid.session_id) == []
    assert "# Sub-agents" in run.runtime.system_prompt(run.agent.session_id)
    kid_prompt = run.runtime.system_prompt(kid.session_id)
    assert "# Sub-agents" not in kid_prompt and "You are `kid`, a sub-agent" in kid_prompt


async def test_deleting_a_child_keeps_its_notebook_and_frees_its_name_but_a_busy_one_stays(
    tmp_path: Path,
) -> None:
    slow_child = {"turns": [{"code": "import time\ntime.sleep(1.5)"}, {"text": "slow done"}]}
    delete = (
        "import json\n"
        "out = {}\n"
        "try:\n"
        "    await rlm.delete_subagent(slow)\n"
        "except Exception as exc:\n"
        "    out['busy'] = str(exc)\n"
        + WAIT_FOR_CHILDREN.replace("print(", "out['waited'] = (")
        + "\nout['deleted'] = await rlm.delete_subagent('slow')\n"
        "out['left'] = [s.name for s in await rlm.list_subagents()]\n"
        "again = await rlm('second go', name='slow')\n"
        "out['again'] = again.notebook_path\n"
        "print(json.dumps(out))"
    )
    script = write_script(
        tmp_path,
        [{"code": 'slow = await rlm("slow work", name="slow")'}, {"code": delete}, {"text": "ok"}],
        slow_child,
    )
    run = headless(tmp_path, script)

    await run_tree(run, "go")

    out = printed_json(run, 1)
    assert "'slow' is running; it was not deleted" in out["busy"]
    assert out["deleted"]["deleted"] is True
    assert out["left"] == []
    assert out["again"] == "analysis.agents/slow-2.ipynb"
    assert (tmp_path / "analysis.agents" / "slow.ipynb").exists()


# A child whose kernel dies once (it kills its own process), then says where it works.
DIES_ONCE_THEN_SAYS_WHERE = {
    "turns": [
        {
            "code": "import os\nif not os.path.exists('died.flag'):\n"
            "    open('died.flag', 'w').close()\n    os.kill(os.getpid(), 9)"
        },
        {"code": "import os\nprint(os.path.basename(os.getcwd()))"},
        {"text": "in {last_output_line}"},
    ]
}


async def test_a_child_whose_kernel_restarts_still_works_in_the_parent_notebooks_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "work").mkdir()
    script = write_script(
        tmp_path,
        [
            {"code": 'a = await rlm("die once", name="alpha")'},
            {"code": WAIT_FOR_CHILDREN},
            {"text": "{last_output_line}"},
        ],
        DIES_ONCE_THEN_SAYS_WHERE,
    )
    run = headless(tmp_path, script, notebook="work/analysis.ipynb")

    outcome, _ = await run_tree(run, "spawn")

    assert outcome.final_text == "[('alpha', 'completed')]", outcome
    (entry,) = run.runtime.list_children(run.agent.session_id)
    log = (Path(entry["session_dir"]) / "session.jsonl").read_text().splitlines()
    results = [e for e in map(json.loads, log) if e["type"] == "tool_result"]
    assert results[0]["status"] == "died"
    assert results[1]["observation"].splitlines()[-1] == "work"
