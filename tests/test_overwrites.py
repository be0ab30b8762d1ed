"""Stream text as JupyterLab keeps it (core/overwrites.py), and the live document holding it."""

from __future__ import annotations

import pytest
from pycrdt import Array, Doc, Map

from prime_agent_lab.core.overwrites import overwritten
from prime_agent_lab.jupyter.live_cell import _append_stream_text, _youtput


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("plain\ntext", "plain\ntext"),
        ("abc\rXY", "XYc"),  # what follows a carriage return overwrites the line's start
        ("\rloading   0%\rloading  50%\rloading 100%", "loading 100%"),
        ("step 1\rstep 2\ndone\n", "step 2\ndone\n"),
        ("windows\r\nline", "windows\nline"),
        ("a\x08b", "b"),
        ("ab\x08\x08cd", "cd"),
        ("line\n\x08x", "line\n\x08x"),  # a backspace never erases a line break
        ("pending\r", "pending\r"),  # nothing to overwrite with yet
    ],
)
def test_carriage_returns_and_backspaces_are_applied_as_jupyterlab_applies_them(
    sent: str, kept: str
) -> None:
    assert overwritten(sent) == kept


def test_a_progress_bar_sent_in_pieces_is_its_last_state_in_the_live_document() -> None:
    doc = Doc()
    doc["cell"] = cell = Map({"outputs": Array()})
    pieces = ["\rloading   0%", "\rloading  50%", "\rloading 100%", "\n", "done\n"]
    for piece in pieces:
        _append_stream_text(cell, "stdout", piece)
    [output] = cell["outputs"].to_py()
    assert output["text"] == "loading 100%\ndone\n"
    assert overwritten("".join(pieces)) == output["text"]  # as if it came in one piece


def test_a_carriage_return_at_the_end_of_one_piece_is_applied_by_the_next() -> None:
    doc = Doc()
    doc["cell"] = cell = Map(
        {"outputs": Array([_youtput({"output_type": "stream", "name": "stdout", "text": "abc\r"})])}
    )
    _append_stream_text(cell, "stdout", "XY")
    assert cell["outputs"].to_py()[0]["text"] == "XYc"
