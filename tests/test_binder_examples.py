"""On Binder the server's root is the checkout: an example notebook opened there lists its
recorded session, and the step-through of it answers (docs/teaching.md, "Examples on Binder").
The layout is built as Binder builds it: the checkout's examples, then the placement postBuild
runs (binder/place_example_sessions.py, run for real), then the server starts on that root."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from prime_agent_lab.core.sessions import SESSION_FILE
from tests.conftest import run_turn

REPO = Path(__file__).resolve().parents[1]
PLACE = Path("binder") / "place_example_sessions.py"
SESSIONS = Path(".prime-agent") / "sessions"


def example_sessions(name: str) -> list[str]:
    return sorted(p.name for p in (REPO / "examples" / name / SESSIONS).iterdir())


def binder_layout(root: Path) -> None:
    """The checkout's `examples/` and `binder/` under `root`, and the placement run in `root`
    with the interpreter postBuild uses, as postBuild runs it."""
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints")
    for folder in ("examples", "binder"):
        shutil.copytree(REPO / folder, root / folder, ignore=ignore, symlinks=True)
    subprocess.run([sys.executable, str(PLACE)], cwd=root, check=True, timeout=120)


@pytest.fixture
def prime_agent_config(jp_root_dir: Path) -> dict[str, Any]:
    """Binder's server: the first example's script, narrated (binder/postBuild)."""
    binder_layout(jp_root_dir)  # before the server starts, as on Binder
    script = jp_root_dir / "examples" / "long-context-search" / "script.json"
    return {"script_path": str(script), "narrate_cells": True}


async def get(jp_fetch: Any, *parts: str, **params: str) -> Any:
    response = await jp_fetch("prime-agent", "api", *parts, params=params or None)
    return json.loads(response.body)


async def test_an_example_notebook_lists_its_session_and_steps_through_it_on_binder(
    jp_fetch: Any, host: Any, jp_root_dir: Path
) -> None:
    notebook = "examples/long-context-search/long-context-search.ipynb"
    (session_id,) = example_sessions("long-context-search")

    listed = (await get(jp_fetch, "sessions", notebook=notebook))["sessions"]

    assert [item["session_id"] for item in listed] == [session_id]
    assert listed[0]["status"] == "inactive" and listed[0]["notebook_path"] == notebook
    assert listed[0]["title"] == "Find the passphrase hidden in the book."
    steps = await get(jp_fetch, "sessions", session_id, "steps")
    assert steps["notebook_path"] == notebook and steps["broken"] is None
    assert len(steps["steps"]) >= 3 and steps["steps"][0]["code"]
    assert steps["steps"][-1]["code"] is None and "AMBER-FALCON-42" in steps["steps"][-1]["text"]
    # Read-only: listing and stepping loaded no agent and started no kernel.
    assert host.agents == {}
    assert host.serverapp.kernel_manager.list_kernels() == []


async def test_the_fan_out_examples_sub_agents_step_through_in_their_own_notebooks(
    jp_fetch: Any, host: Any
) -> None:
    notebook = "examples/fan-out/fan-out.ipynb"
    listed = (await get(jp_fetch, "sessions", notebook=notebook))["sessions"]
    (root,) = listed
    steps = await get(jp_fetch, "sessions", root["session_id"], "steps")
    children = [child for step in steps["steps"] for child in step["children"]]
    assert [c["name"] for c in children] == ["part-a", "part-b", "part-c"]
    lane = await get(jp_fetch, "sessions", children[0]["session_id"], "steps")
    assert lane["notebook_path"] == "examples/fan-out/fan-out.agents/part-a.ipynb"
    assert (Path(host.serverapp.root_dir) / lane["notebook_path"]).is_file()
    assert lane["steps"] and lane["broken"] is None


async def test_placed_example_sessions_are_someone_elses_until_trusted(
    jp_fetch: Any, host: Any, jp_root_dir: Path
) -> None:
    (session_id,) = example_sessions("harness-refinement")
    trust = await get(jp_fetch, "sessions", session_id, "trust")
    assert trust["trusted"] is False  # its harness store is signed elsewhere
    assert host.agents == {}


def test_the_placement_keeps_the_recorded_log_but_its_notebook_paths(tmp_path: Path) -> None:
    post_build = (REPO / "binder" / "postBuild").read_text()
    assert f'[sys.executable, "{PLACE.as_posix()}"]' in post_build  # what Binder runs
    binder_layout(tmp_path)
    for example in ("long-context-search", "fan-out", "harness-refinement"):
        for session_id in example_sessions(example):
            recorded = REPO / "examples" / example / SESSIONS / session_id / SESSION_FILE
            placed = tmp_path / SESSIONS / session_id / SESSION_FILE
            old, new = recorded.read_text().splitlines(), placed.read_text().splitlines()
            assert new[1:] == old[1:]
            header, before = json.loads(new[0]), json.loads(old[0])
            assert header["notebook_path"] == f"examples/{example}/{before['notebook_path']}"
            assert {k: v for k, v in header.items() if "notebook_path" not in k} == {
                k: v for k, v in before.items() if "notebook_path" not in k
            }
    # Run again (a rebuild), with a session of the user's own there: nothing is overwritten.
    mine = tmp_path / SESSIONS / example_sessions("fan-out")[0] / SESSION_FILE
    mine.write_text("mine\n")
    subprocess.run([sys.executable, str(PLACE)], cwd=tmp_path, check=True, timeout=120)
    assert mine.read_text() == "mine\n"


async def test_opening_an_example_shows_its_recorded_session_and_a_new_one_replays_it(
    host: Any, jp_root_dir: Path
) -> None:
    """The chat panel attaches the notebook's latest session: the recorded one, run nothing;
    a New session replays the example from its script (what a Binder user does to watch it)."""
    notebook = "examples/long-context-search/long-context-search.ipynb"
    (recorded,) = example_sessions("long-context-search")
    saved = (jp_root_dir / notebook).read_text()

    opened = await host.attach(notebook)

    assert opened.session_id == recorded and not opened.running
    assert (jp_root_dir / notebook).read_text() == saved
    fresh = await host.attach(notebook, new=True)
    ended = await run_turn(host, fresh.session_id, "Find the passphrase hidden in the book.")
    assert ended["stop_reason"] == "end_turn" and "AMBER-FALCON-42" in ended["final_text"]
