"""The empty code cell at the end of the notebooks the server writes for agents (issue 19, item
2): added once, nobody's agent cell, and agent cells go in above it. Forks and clones through the
server are in test_branching.py."""

from __future__ import annotations

from pathlib import Path

import nbformat

from prime_agent_lab.core.blank_cell import blank_code_cell, is_blank_code_cell, with_blank_cell

from .test_subagents import CHILD, headless, run_tree, write_script


def test_one_empty_cell_is_added_and_never_a_second() -> None:
    heading = {"id": "h", "cell_type": "markdown", "source": "# child", "metadata": {}}

    once = with_blank_cell([heading])
    twice = with_blank_cell(once)

    assert len(once) == 2 and is_blank_code_cell(once[-1])
    assert twice == once
    assert once[-1]["metadata"] == {}  # no `prime_agent`: not an agent cell
    nbformat.validate(nbformat.from_dict(_notebook(once)))


def test_a_cell_with_source_or_outputs_is_not_blank() -> None:
    typed = {**blank_code_cell(), "source": "x = 1"}
    stream = {"output_type": "stream", "name": "stdout", "text": ""}
    ran = {**blank_code_cell(), "outputs": [stream]}
    markdown = {**blank_code_cell(), "cell_type": "markdown"}

    assert is_blank_code_cell({**blank_code_cell(), "source": [" ", "\n"]})
    assert not any(is_blank_code_cell(cell) for cell in (typed, ran, markdown))
    assert len(with_blank_cell([typed])) == 2


async def test_a_sub_agents_notebook_ends_in_one_empty_cell_below_its_agent_cells(
    tmp_path: Path,
) -> None:
    spawn = (
        'a = await rlm("alpha words", name="alpha")\n'
        "import asyncio\n"
        "while (await rlm.list_subagents())[0].status == 'running':\n"
        "    await asyncio.sleep(0.05)\n"
    )
    script = write_script(tmp_path, [{"code": spawn}, {"text": "spawned"}], CHILD)

    outcome, _ = await run_tree(headless(tmp_path, script), "fan out")

    assert outcome.stop_reason == "end_turn", outcome
    nb = nbformat.read(tmp_path / "analysis.agents" / "alpha.ipynb", as_version=4)
    nbformat.validate(nb)
    blank = [i for i, c in enumerate(nb.cells) if is_blank_code_cell(c)]
    assert blank == [len(nb.cells) - 1]
    assert "prime_agent" not in nb.cells[-1].metadata
    agent_cells = [c for c in nb.cells if "prime_agent" in c.metadata and c.cell_type == "code"]
    assert [c.outputs[0]["text"] for c in agent_cells] == ["ALPHA WORDS\n"]


def _notebook(cells: list[dict[str, object]]) -> dict[str, object]:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}
