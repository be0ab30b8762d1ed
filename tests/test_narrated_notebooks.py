"""`narrate_cells` (docs/teaching.md): the user's message and the agent's answer as markdown
cells around the agent's code cells, so the saved notebook reads on its own and re-runs top to
bottom with nbclient to the same outputs."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from prime_agent_lab.core.sessions import SessionLog
from prime_agent_lab.core.turn_review import read_turn
from tests.notebook_rerun import assert_reruns_to_same_outputs
from tests.test_cli import cli, json_lines

SCRIPT = {
    "turns": [
        {"text": "Counting.", "code": "words = 'the cat saw the dog'.split()\nprint(len(words))"},
        {"text": "And the distinct ones.", "code": "sorted(set(words))"},
        {"text": "There are {last_output_line}."},
        {"text": "The most common:", "code": "import collections\ncollections.Counter(words)"},
        {"text": "It is 'the'."},
    ]
}  # fmt: skip


def narrated_session(tmp_path: Path, *flags: str) -> tuple[Path, Path]:
    """Two turns of SCRIPT run headless; the notebook and the session folder."""
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    common = ("--mode", "json", "--script-path", "script.json", *flags)
    first = cli(tmp_path, "run", *common, "How many words?")
    assert first.returncode == 0, first.stderr
    second = cli(tmp_path, "run", *common, "--continue", "Which word is most common?")
    assert second.returncode == 0, second.stderr
    end = json_lines(second.stdout)[-1]
    return tmp_path / end["notebook"], tmp_path / end["session_dir"]


def test_a_narrated_notebook_holds_each_message_and_answer_around_the_turns_code_cells(
    tmp_path: Path,
) -> None:
    notebook, _ = narrated_session(tmp_path, "--narrate-cells")

    nb = nbformat.read(notebook, as_version=4)
    nbformat.validate(nb)
    shape = [(c.cell_type, c.metadata["prime_agent"].get("narrates")) for c in nb.cells]
    assert shape == [
        ("markdown", "user"),
        ("code", None),
        ("code", None),
        ("markdown", "answer"),
        ("markdown", "user"),
        ("code", None),
        ("markdown", "answer"),
    ]
    assert nb.cells[0].source == "**User:** How many words?"
    assert nb.cells[3].source == "**Agent:** There are ['cat', 'dog', 'saw', 'the']."
    assert nb.cells[6].source == "**Agent:** It is 'the'."
    turns = [c.metadata["prime_agent"]["turn"] for c in nb.cells]
    assert turns == [1, 1, 1, 1, 2, 2, 2]


def test_a_narrated_notebook_reruns_with_nbclient_to_the_same_outputs(tmp_path: Path) -> None:
    notebook, _ = narrated_session(tmp_path, "--narrate-cells")

    assert_reruns_to_same_outputs(notebook)


def test_a_turns_review_lists_its_code_cells_and_not_its_narration(tmp_path: Path) -> None:
    notebook, session_dir = narrated_session(tmp_path, "--narrate-cells")

    nb = nbformat.read(notebook, as_version=4)
    code_ids = [c.id for c in nb.cells if c.cell_type == "code"]
    record = read_turn(SessionLog.read(session_dir), 1)
    assert [cell["cell_id"] for cell in record.cells] == code_ids[:2]


def test_without_narrate_cells_the_notebook_holds_only_the_agents_code_cells(
    tmp_path: Path,
) -> None:
    notebook, _ = narrated_session(tmp_path)

    nb = nbformat.read(notebook, as_version=4)
    assert [c.cell_type for c in nb.cells] == ["code", "code", "code"]
