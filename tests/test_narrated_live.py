"""`narrate_cells` on the server (docs/teaching.md): the narration goes into the live document
around the turn's cells, before the user's trailing blank cell, reaches the saved file, and a
whole-turn revert takes the turn's narration with its cells."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from .conftest import run_turn, use_script, wait_for
from .test_server_e2e import read_saved_notebook
from .test_snapshots import quick_snapshots
from .test_turn_revert import CHANGE_X, SET_X, revert, settled


@pytest.fixture
def prime_agent_config() -> dict[str, Any]:
    return {"narrate_cells": True}


def shape(cells: list[dict[str, Any]]) -> list[tuple[str, str | None, int | None]]:
    """Each cell as (kind, what it narrates, turn); a cell of the user's has no turn."""
    found = []
    for cell in cells:
        mark = cell.get("metadata", {}).get("prime_agent") or {}
        found.append((cell["cell_type"], mark.get("narrates"), mark.get("turn")))
    return found


async def test_narration_cells_go_around_the_turns_cells_before_the_blank_cell_and_are_saved(
    host: Any, make_notebook: Any, agent_script: Any, jp_root_dir: Path
) -> None:
    use_script(host, agent_script(SET_X))
    path = make_notebook("narrated.ipynb", [nbformat.v4.new_code_cell("")])
    agent = await host.attach(path)

    ended = await run_turn(host, agent.session_id, "set x")

    assert ended["stop_reason"] == "end_turn", ended
    expected = [("markdown", "user", 1), ("code", None, 1), ("markdown", "answer", 1)]
    expected.append(("code", None, None))  # the user's blank cell stays last
    cells = await agent.notebook.cells()  # type: ignore[attr-defined]
    assert shape(cells) == expected
    assert [c["source"] for c in cells[::2]] == ["**User:** set x", "**Agent:** x is set"]

    def saved() -> bool:
        nb = read_saved_notebook(jp_root_dir / path)
        return nb is not None and shape([dict(c) for c in nb.cells]) == expected

    await wait_for(saved, timeout=20)


async def test_reverting_a_whole_turn_removes_its_narration_and_keeps_the_other_turns(
    host: Any, jp_fetch: Any, make_notebook: Any, agent_script: Any
) -> None:
    use_script(host, agent_script([*SET_X, *CHANGE_X]))
    quick_snapshots(host)
    agent = await host.attach(make_notebook("narrated-revert.ipynb"))
    await run_turn(host, agent.session_id, "set x")
    await settled(host, agent)
    await run_turn(host, agent.session_id, "change x")
    await settled(host, agent)

    answer = await revert(jp_fetch, agent.session_id, 2)

    assert answer.code == 200, answer.body
    assert len(json.loads(answer.body)["cells_removed"]) == 2  # the code cells, as before
    cells = await agent.notebook.cells()  # type: ignore[attr-defined]
    agents = [s for s in shape(cells) if s[2] is not None]  # not the user's blank cell
    assert agents == [("markdown", "user", 1), ("code", None, 1), ("markdown", "answer", 1)]
