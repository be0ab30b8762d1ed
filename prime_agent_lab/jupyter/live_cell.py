"""One agent cell in the live shared document: `LiveCellWriter` keeps the cell as the agent
knows it and writes it into the shared cell, finding it by id on every write, so a move, a reload
from disk or a busy document never loses what was written (docs/architecture.md, "Live
notebook"). The notebook around it is `live_notebook.py`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from pycrdt import Array, Map, Text

from ..adapters.output_cap import NotebookOutputCap
from ..core.output_fold import Appended, Change, OutputFold, Replaced, StreamExtended
from ..core.overwrites import overwritten
from ..core.ports import OutputEvent

ORIGIN = "prime-agent"
RETRY_INTERVAL = 0.02  # seconds between attempts while a reload holds the document
BUSY_LIMIT = 120.0  # seconds a reload may hold the document before a write is given up

log = logging.getLogger(__name__)

Notice = Callable[[int | None, str, str], None]
Delta = Callable[[Map], None]


def insert_before_trailing_blank(doc: Any, ycell: Map) -> None:
    cells = doc.ycells
    index = len(cells)
    # A trailing empty cell is where the user types next: keep it last.
    if index and _is_blank_code_cell(cells[index - 1]):
        index -= 1
    cells.insert(index, ycell)


def _youtput(output: dict[str, Any]) -> Map:
    if output.get("output_type") == "stream":
        return Map({**output, "text": Text(overwritten(str(output.get("text", ""))))})
    return Map(dict(output))


def _as_stored(output: dict[str, Any]) -> dict[str, Any]:
    """An output of the fold as the live document holds it (`_youtput`), for comparing."""
    if output.get("output_type") == "stream":
        return {**output, "text": overwritten(str(output.get("text", "")))}
    return output


def _is_blank_code_cell(ycell: Map) -> bool:
    try:
        source = str(ycell["source"])
        outputs = ycell.get("outputs")
        return (
            ycell.get("cell_type") == "code"
            and not source.strip()
            and (outputs is None or len(outputs) == 0)
            and "prime_agent" not in ycell["metadata"]
        )
    except (KeyError, TypeError):
        return False


class LiveCellWriter:
    """Writes one agent cell. It keeps the cell as the agent knows it (source, outputs, count,
    state) and finds the shared cell by id on every write, so a move, a reload from disk or a
    busy document never loses what was written."""

    def __init__(
        self,
        doc: Any,
        ycell: Map,
        cell: dict[str, Any],
        cap: NotebookOutputCap,
        notice: Notice | None = None,
        place: Callable[[Any, Map, str], None] | None = None,
    ) -> None:
        """`place` puts the cell back into a document a reload took it from (default: at the
        end, before a trailing blank cell)."""
        self._doc = doc
        self._place = place
        self._ycell: Map | None = ycell
        self._cell = cell
        self._fold = OutputFold(admit_stream=cap.admit)
        self._execution_count: int | None = None
        self._state = "running"  # inserted so (see _try_insert)
        self._notice = notice
        self._in_sync = True  # the shared cell shows what this writer holds
        self._reloaded = False  # a reload from disk happened since the last full write
        self._quiet_restore = False
        self._flush: asyncio.Task[None] | None = None
        self.cell_id: str = cell["id"]
        self.turn = (cell["metadata"].get("prime_agent") or {}).get("turn")
        self.finished_at: float | None = None
        self.detached = False  # the user deleted the cell

    @property
    def document(self) -> Any:
        return self._doc

    def snapshot(self) -> dict[str, Any]:
        """The cell as nbformat JSON, as this writer knows it."""
        return {
            **self._cell,
            "outputs": self._fold.outputs(),
            "execution_count": self._execution_count,
        }

    # ------------------------------------------------------------ the cell's progress

    def set_running(self) -> None:
        if self._state == "running" and not self._fold and self._in_sync:
            return  # inserted running (see _try_insert): nothing to write
        self._fold.reset()
        self._execution_count = None
        self._state = "running"
        self._write(_mark_running)

    def apply(self, event: OutputEvent) -> None:
        """Fold the event (core/output_fold.py) and make its changes in the shared cell, all in
        one transaction."""
        changes = self._fold.apply(event)
        if changes:
            self._write(lambda ycell: _make_changes(ycell, changes))

    def finish(self, execution_count: int | None) -> None:
        self._fold.finish(execution_count)
        self._execution_count = execution_count
        self._state = "idle"
        self.finished_at = time.monotonic()
        self._write(lambda ycell: _mark_finished(ycell, execution_count))

    # ------------------------------------------------------------ reaching the document

    def _write(self, *deltas: Delta) -> None:
        """Apply `deltas` to the shared cell if it is the one last written; otherwise (moved,
        reloaded, document busy) write the whole cell as this writer knows it, now or soon."""
        if self.detached:
            return
        if self._in_sync:
            try:
                txn = self._doc.ydoc.transaction(origin=ORIGIN)
            except RuntimeError:  # a reload from disk holds its own transaction across awaits
                txn = None
            if txn is not None:
                with txn:
                    ycell = self._ycell
                    # A deleted Map reads as empty, so this also tells whether it is still there.
                    if ycell is not None and ycell.get("id") == self.cell_id:
                        for delta in deltas:
                            delta(ycell)
                        return
            self._in_sync = False
        if not self._sync_now():
            self._flush_soon()

    def restore_after_reload(self) -> None:
        """Called from inside the reload's commit: write the cell back once it is over."""
        self._reloaded = True
        self._in_sync = False
        self._flush_soon()

    def move_to(self, doc: Any) -> None:
        """The room was dropped and opened again: continue in the new document."""
        self._doc = doc
        self._ycell = None
        self._reloaded = True
        self._quiet_restore = True
        self._in_sync = False
        self._flush_soon()

    async def settled(self) -> None:
        """Until the document shows this cell as the writer knows it (or BUSY_LIMIT passed)."""
        if self._flush is not None:
            await self._flush

    def _flush_soon(self) -> None:
        if self._flush is None or self._flush.done():
            self._flush = asyncio.ensure_future(self._flush_when_free())

    async def _flush_when_free(self) -> None:
        deadline = time.monotonic() + BUSY_LIMIT
        while not self._sync_now():
            if time.monotonic() > deadline:
                log.warning(
                    "agent cell %s: the document stayed busy for %.0f s; its latest output "
                    "is only in the session log",
                    self.cell_id,
                    BUSY_LIMIT,
                )
                return
            await asyncio.sleep(RETRY_INTERVAL)

    def _sync_now(self) -> bool:
        """Write the whole cell as this writer knows it. False while the document is busy."""
        if self.detached or self._in_sync:
            return True
        try:
            txn = self._doc.ydoc.transaction(origin=ORIGIN)
        except RuntimeError:
            return False
        restored = False
        with txn:
            ycell = self._find()
            if ycell is not None:
                self._write_all(ycell)
            elif self._reloaded:
                ycell = self._append_again()
                restored = not self._quiet_restore
            else:
                self.detached = True
                log.info("agent cell %s was deleted; its further output is dropped", self.cell_id)
            self._ycell = ycell
        self._in_sync = not self.detached
        self._reloaded = self._quiet_restore = False
        if restored and self._notice is not None:
            self._notice(
                self.turn,
                "cell_restored",
                f"The notebook was reloaded from disk without agent cell {self.cell_id}; "
                "it was added again at the end with its code and output so far.",
            )
        return True

    def _find(self) -> Map | None:
        ycell = self._ycell
        if ycell is not None and ycell.get("id") == self.cell_id:
            return ycell
        cells = self._doc.ycells
        for index in range(len(cells) - 1, -1, -1):  # agent cells are usually near the end
            candidate = cells[index]
            if candidate.get("id") == self.cell_id:
                return candidate
        return None

    def _write_all(self, ycell: Map) -> None:
        wanted = [_as_stored(o) for o in self._fold.outputs()]
        outputs = ycell.get("outputs")
        if not isinstance(outputs, Array):
            ycell["outputs"] = outputs = Array()
        if outputs.to_py() != wanted:
            del outputs[:]
            outputs.extend([_youtput(o) for o in wanted])
        if ycell.get("execution_count") != self._execution_count:
            ycell["execution_count"] = self._execution_count
        if ycell.get("execution_state") != self._state:
            ycell["execution_state"] = self._state

    def _append_again(self) -> Map:
        ycell = self._doc.create_ycell(self.snapshot())
        if self._place is not None:
            self._place(self._doc, ycell, self.cell_id)
        else:
            insert_before_trailing_blank(self._doc, ycell)
        ycell["execution_state"] = self._state
        return ycell


# ---------------------------------------------------------------- edits of one shared cell


def _make_changes(ycell: Map, changes: list[Change]) -> None:
    """Make the changes of the cell's fold in the shared cell."""
    for change in changes:
        if isinstance(change, StreamExtended):
            _append_stream_text(ycell, change.name, change.text)
        elif isinstance(change, Appended):
            _outputs_of(ycell).append(_youtput(change.output))
        elif isinstance(change, Replaced):
            _replace_output(ycell, change.index, change.output)
        else:
            _clear_outputs(ycell)


def _outputs_of(ycell: Map) -> Array:
    outputs = ycell.get("outputs")
    if not isinstance(outputs, Array):
        ycell["outputs"] = outputs = Array()
    return outputs


def _mark_running(ycell: Map) -> None:
    del _outputs_of(ycell)[:]
    ycell["execution_count"] = None
    ycell["execution_state"] = "running"


def _clear_outputs(ycell: Map) -> None:
    del _outputs_of(ycell)[:]


def _replace_output(ycell: Map, index: int, output: dict[str, Any]) -> None:
    outputs = _outputs_of(ycell)
    if index < len(outputs):
        outputs[index] = Map(dict(output))


def _append_stream_text(ycell: Map, name: str, text: str) -> None:
    outputs = _outputs_of(ycell)
    if len(outputs):
        last = outputs[len(outputs) - 1]
        if (
            isinstance(last, Map)
            and last.get("output_type") == "stream"
            and last.get("name") == name
        ):
            shared = last["text"]
            if isinstance(shared, Text):
                # Bind first: `last["text"] += s` would write the Text back and empty it.
                if _overwrites(shared, text):  # as JupyterLab keeps it: the bar's last state
                    resolved = overwritten(str(shared) + text)
                    del shared[:]
                    shared += resolved
                else:
                    shared += text
                return
    outputs.append(Map({"output_type": "stream", "name": name, "text": Text(overwritten(text))}))


def _overwrites(shared: Text, text: str) -> bool:
    """Whether appending `text` changes what is already there: it holds a backspace or a
    carriage return, or the shared text ends with a carriage return still to apply."""
    return "\r" in text or "\x08" in text or (len(shared) > 0 and shared[len(shared) - 1 :] == "\r")


def _mark_finished(ycell: Map, execution_count: int | None) -> None:
    outputs = _outputs_of(ycell)
    for index in range(len(outputs)):
        item = outputs[index]
        if isinstance(item, Map) and item.get("output_type") == "execute_result":
            item["execution_count"] = execution_count
    ycell["execution_count"] = execution_count
    ycell["execution_state"] = "idle"
