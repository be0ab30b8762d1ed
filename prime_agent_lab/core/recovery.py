"""Closing a turn that a crash cut short, telling the model what really happened.

A cell that was running when the process stopped did run, partly: its `cell_started` entry is in
the log and its output so far is in the notebook. Its call gets a `tool_result` with status
`interrupted` and that partial output, rather than the "was not run" that a call which never
started gets.
"""

from __future__ import annotations

import logging
from typing import Any

from .observation import build_observation
from .ports import ExecutionResult, NotebookPort, Output
from .redaction import Redactor
from .sessions import SessionLog

log = logging.getLogger(__name__)

INTERRUPTED_NOTE = (
    "[interrupted] The process running this session (the Jupyter server or the CLI) stopped while "
    "this cell was running. The cell ran partly: {what} Whatever it did after that is lost, and "
    "its kernel may have stopped too, so check that the variables you need still exist."
)


async def close_interrupted_turn(
    session: SessionLog,
    notebook: NotebookPort | None,
    *,
    output_cap: int,
    accepts_images: bool = True,
    redactor: Redactor | None = None,
) -> int | None:
    """Mark a turn cut by a crash as interrupted; its running cells get what they printed."""
    turn = session.open_turn()
    if turn is None:
        return None
    redactor = redactor or Redactor.from_environ()
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
            status="interrupted", outputs=outputs or [], note=INTERRUPTED_NOTE.format(what=what)
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
            "preview": "interrupted: the process stopped while this cell ran",
        }
        if observation.images:
            entry["images"] = [
                session.store_image(i.media_type, i.data_base64) for i in observation.images
            ]
        session.append("tool_result", **entry)
    return session.close_interrupted_turn()


async def _read_outputs(notebook: NotebookPort | None, cell_id: str) -> list[Output] | None:
    reader = getattr(notebook, "read_cell_outputs", None)
    if reader is None or not cell_id:
        return None
    try:
        return await reader(cell_id)
    except Exception:  # the notebook is gone or unreadable: say so rather than fail the reopen
        log.warning("reading the outputs of cell %s failed", cell_id, exc_info=True)
        return None
