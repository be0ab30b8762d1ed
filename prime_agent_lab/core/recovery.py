"""Closing a turn that a crash cut short, telling the model what really happened.

A cell that was running when the process stopped did run, partly: its `cell_started` entry is in
the log and its output so far is in the notebook. Its call gets a `tool_result` with status
`interrupted` and that partial output, rather than the "was not run" that a call which never
started gets.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .observation import build_observation
from .ports import ExecutionResult, NotebookPort, Output
from .redaction import Redactor
from .sessions import SessionLog
from .settings import DEFAULTS

log = logging.getLogger(__name__)

INTERRUPTED_NOTE = (
    "[interrupted] The process running this session (the Jupyter server or the CLI) stopped while "
    "this cell was running. The cell ran partly: {what} Whatever it did after that is lost, and "
    "its kernel may have stopped too, so check that the variables you need still exist."
)


@dataclass(frozen=True)
class Cut:
    """Why a turn was left without its end: what its running cells' results and its `turn_end`
    say (`note` takes `{what}`, the part about the cell's output)."""

    note: str
    preview: str
    turn_note: str


PROCESS_STOPPED = Cut(
    INTERRUPTED_NOTE,
    "interrupted: the process stopped while this cell ran",
    "the server stopped while this turn was running",
)
LOG_NOT_WRITTEN = Cut(
    "[not recorded] The session log could not be written when this cell ended (the disk was "
    "full), so its result was not recorded and the turn was stopped there. The cell ran: {what}",
    "not recorded: the session log could not be written",
    "the session log could not be written (the disk was full); this turn was closed once it "
    "could be written again",
)


async def close_interrupted_turn(
    session: SessionLog,
    notebook: NotebookPort | None,
    *,
    output_cap: int,
    accepts_images: bool = DEFAULTS.accepts_images,
    redactor: Redactor | None = None,
    cause: Cut = PROCESS_STOPPED,
) -> int | None:
    """Mark a turn cut by a crash (or a log that could not be written: `cause`) as interrupted;
    its running cells get what they printed."""
    if session.open_turn() is None:
        return None
    await record_unfinished_cells(
        session,
        notebook,
        output_cap=output_cap,
        accepts_images=accepts_images,
        redactor=redactor,
        cause=cause,
    )
    return session.close_interrupted_turn(cause.turn_note)


async def record_unfinished_cells(
    session: SessionLog,
    notebook: NotebookPort | None,
    *,
    output_cap: int,
    accepts_images: bool = DEFAULTS.accepts_images,
    redactor: Redactor | None = None,
    cause: Cut = PROCESS_STOPPED,
) -> None:
    """A `tool_result` with status `interrupted` for each cell of the open turn that started and
    has none: the output the notebook holds, and `cause` saying why."""
    redactor = redactor or Redactor.from_environ()
    turn = session.open_turn()
    for started in session.unfinished_cells():
        cell_id = str(started.get("cell_id", ""))
        outputs = await _read_outputs(notebook, cell_id)
        if outputs is None:
            what = (
                "its output could not be read: the notebook does not hold the cell (it was "
                "deleted, or the process stopped before the notebook was saved)."
            )
        elif outputs:
            what = "its output up to that moment is above."
        else:
            what = "it had printed nothing yet."
        result = ExecutionResult(
            status="interrupted", outputs=outputs or [], note=cause.note.format(what=what)
        )
        observation = build_observation(
            result,
            cap=output_cap,
            accepts_images=accepts_images,
            where_rest=f"the full output is in notebook cell {cell_id}",
            redact=redactor.text,
        )
        entry: dict[str, Any] = {
            "turn": started.get("turn", turn),
            "tool_call_id": started.get("tool_call_id"),
            "cell_id": cell_id or None,
            "status": "interrupted",
            "execution_count": None,
            "observation": observation.text,
            "preview": cause.preview,
        }
        if observation.images:
            entry["images"] = [
                session.store_image(i.media_type, i.data_base64) for i in observation.images
            ]
        session.append("tool_result", **entry)


async def _read_outputs(notebook: NotebookPort | None, cell_id: str) -> list[Output] | None:
    reader = getattr(notebook, "read_cell_outputs", None)
    if reader is None or not cell_id:
        return None
    try:
        return await reader(cell_id)
    except Exception:  # the notebook is gone or unreadable: say so rather than fail the reopen
        log.warning("reading the outputs of cell %s failed", cell_id, exc_info=True)
        return None
