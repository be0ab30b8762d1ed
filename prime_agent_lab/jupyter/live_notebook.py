"""The notebook port over the live shared document of jupyter-collaboration.

Every edit goes into the same Y document the open JupyterLab tabs render, so agent cells and their
outputs appear live; the room saves the file. Pitfalls this module respects (measured, see
docs/architecture.md): ask for the live document (`copy=False`), fetch it again per cell, append
stream text to the existing `Text` in place, clear output arrays in place, never rewrite the whole
notebook, mark agent cells trusted.

The document can change under a running cell in three ways, and none of them may lose the cell:

- JupyterLab moves a cell by deleting it and inserting a copy with the same id: every write finds
  the cell by id, never trusting a stored reference.
- jupyter-collaboration reloads the document when the file changed on disk (another editor,
  `git checkout`, a second path to the same file). The reload holds its own transaction across
  awaits, so a write meanwhile is refused; it replaces cells with the file's version or drops
  them. Each writer keeps the cell as the agent knows it and writes it back once the reload is
  over: outputs restored, or the whole cell appended again (with a notice) when the file did not
  have it.
- The user deletes the cell: further output is dropped (only a deletion outside a reload counts).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from pycrdt import Array, Map, Text

from ..adapters.output_cap import NotebookOutputCap
from ..core.branching import OTHER_BRANCH, mark_cell
from ..core.output_fold import Appended, Change, OutputFold, Replaced, StreamExtended
from ..core.overwrites import overwritten
from ..core.ports import NotebookUnavailable, OutputEvent

__all__ = ["ORIGIN", "LiveCellWriter", "LiveNotebook", "NotebookUnavailable"]

ORIGIN = "prime-agent"
RETRY_INTERVAL = 0.02  # seconds between attempts while a reload holds the document
BUSY_LIMIT = 120.0  # seconds a reload may hold the document before a write is given up
# A file rewritten during the last moments of a turn is noticed by the room's file watcher (1 s
# polling by default) after the turn ended: its cells stay protected a little longer.
RELOAD_GRACE = 5.0

log = logging.getLogger(__name__)

Notice = Callable[[int | None, str, str], None]
Delta = Callable[[Map], None]


class LiveNotebook:
    def __init__(
        self,
        ydoc_extension: Any,
        path: str,
        output_cap: int,
        *,
        file_ids: Any = None,
        contents: Any = None,
    ) -> None:
        """`file_ids` (jupyter-server-fileid's manager) lets the notebook follow renames;
        `contents` (the contents manager) lets it notice that the file was deleted."""
        self._ext = ydoc_extension
        self.path = path
        self._output_cap = output_cap
        self._supports_create = (
            "create" in inspect.signature(ydoc_extension.get_document).parameters
        )
        self._file_ids = file_ids
        self._file_id: str | None = file_ids.index(path) if file_ids is not None else None
        self._contents = contents
        self._last_writer: LiveCellWriter | None = None
        self._writers: list[LiveCellWriter] = []
        self._current_turn: Any = None
        self._observed: Any = None
        self._room: Any = None
        self.on_moved: Callable[[str, str], None] | None = None
        self.on_notice: Notice | None = None
        self.turn_running: Callable[[], bool] = lambda: False

    # ------------------------------------------------------------ where the notebook is

    def follow_move(self) -> str:
        """The notebook's current path: a rename (contents API) keeps the file id."""
        if self._file_ids is None or self._file_id is None:
            return self.path
        current = self._file_ids.get_path(self._file_id)
        if current and current != self.path:
            old, self.path = self.path, current
            log.info("notebook %s was moved to %s; the agent follows it", old, current)
            if self.on_moved is not None:
                self.on_moved(old, current)
        return self.path

    async def _check_exists(self) -> None:
        self.follow_move()
        if self._contents is None:
            return
        exists = self._contents.file_exists(self.path)
        if inspect.isawaitable(exists):
            exists = await exists
        if not exists:
            raise NotebookUnavailable(
                f"the notebook {self.path} was deleted; agent cells have nowhere to go "
                "(the session keeps its record)"
            )

    async def document(self) -> Any:
        await self._check_exists()
        kwargs: dict[str, Any] = {
            "path": self.path,
            "content_type": "notebook",
            "file_format": "json",
            "copy": False,
        }
        if self._supports_create:
            kwargs["create"] = True
        doc = await self._ext.get_document(**kwargs)
        if doc is None:
            raise NotebookUnavailable(f"could not open the live document of {self.path}")
        self._observe(doc)
        return doc

    # ------------------------------------------------------------ reloads from disk

    def _observe(self, doc: Any) -> None:
        if doc is self._observed:
            return
        self._observed = doc
        self._room = _room_of(self._ext, doc)
        doc.ycells.observe_deep(lambda _events: self._on_cells_changed(doc))

    def _on_cells_changed(self, doc: Any) -> None:
        # Runs inside someone else's commit: an exception here would fail their transaction.
        try:
            if doc is not self._observed or not _reloading(self._room):
                return
            for writer in self._guarded():
                if writer.document is doc:
                    writer.restore_after_reload()
        except Exception:
            log.exception("checking agent cells after a change of %s failed", self.path)

    def _guarded(self) -> list[LiveCellWriter]:
        """Writers whose cells a reload must not take away: the running turn's, and recent ones."""
        running = self.turn_running()
        now = time.monotonic()
        return [
            w
            for w in self._writers
            if not w.detached
            and (
                w.finished_at is None
                or now - w.finished_at < RELOAD_GRACE
                or (running and w.turn == self._current_turn)
            )
        ]

    def _notice(self, turn: int | None, kind: str, text: str) -> None:
        log.warning("%s: %s", self.path, text)
        if self.on_notice is not None:
            self.on_notice(turn, kind, text)

    # ------------------------------------------------------------ cells

    async def append_code_cell(self, source: str, metadata: dict[str, Any]) -> LiveCellWriter:
        doc = await self.document()
        cell_id = uuid.uuid4().hex[:12]
        cell = {
            "id": cell_id,
            "cell_type": "code",
            "source": source,
            "metadata": {"trusted": True, **metadata},
            "outputs": [],
            "execution_count": None,
        }
        ycell = doc.create_ycell(cell)
        deadline = time.monotonic() + BUSY_LIMIT
        while not _try_insert(doc, ycell):
            if time.monotonic() > deadline:
                raise NotebookUnavailable(
                    f"the live document of {self.path} stayed busy for {BUSY_LIMIT:.0f} s"
                )
            await asyncio.sleep(RETRY_INTERVAL)
        self._current_turn = (metadata.get("prime_agent") or {}).get("turn")
        self._writers = self._guarded()  # forget cells no reload needs to bring back
        writer = LiveCellWriter(
            doc,
            ycell,
            cell,
            NotebookOutputCap(self._output_cap),
            notice=self._notice,
            place=self._insert_in_order,
        )
        self._writers.append(writer)
        self._last_writer = writer
        return writer

    def _insert_in_order(self, doc: Any, ycell: Map, cell_id: str) -> None:
        """Write back a cell a reload took away: before the cells of agent writers that came
        after it, else at the end. Each writer writes itself back when the document is free
        (the running cell first, most often), so without this a turn's cells came back in the
        order their writers got there."""
        ids = [w.cell_id for w in self._writers]
        later = set(ids[ids.index(cell_id) + 1 :]) if cell_id in ids else set()
        cells = doc.ycells
        if later:
            for index in range(len(cells)):
                if cells[index].get("id") in later:
                    cells.insert(index, ycell)
                    return
        _insert_before_trailing_blank(doc, ycell)

    async def save(self) -> None:
        """Settle the last cell, then repair the one case the room cannot see: every tab closed
        during a long cell, so the room was dropped and the rest of the cell's output went into a
        detached document. Write that cell into the live one."""
        writer, self._last_writer = self._last_writer, None
        if writer is None or writer.detached:
            return
        await writer.settled()
        if _room_of(self._ext, writer.document) is not None:
            return  # a room still holds the cell's document: nothing to repair
        doc = await self.document()
        if doc is not writer.document:
            writer.move_to(doc)
            await writer.settled()

    async def read_cell_outputs(self, cell_id: str) -> list[dict[str, Any]] | None:
        """The outputs the live document holds for a cell (found by id), or None."""
        doc = await self.document()
        for ycell in doc.ycells:
            if ycell.get("id") == cell_id:
                outputs = ycell.get("outputs")
                return [] if outputs is None else list(outputs.to_py())
        return None

    async def cells(self) -> list[dict[str, Any]]:
        """Every cell of the live document, as plain dicts."""
        doc = await self.document()
        return list(doc.get()["cells"])

    async def mark_branches(self, session_id: str, on: set[str], off: set[str]) -> int:
        """Mark this session's agent cells written off the current branch, unmark those on it
        (docs/branching.md). Returns how many cells changed."""
        doc = await self.document()
        deadline = time.monotonic() + BUSY_LIMIT
        while True:
            try:
                txn = doc.ydoc.transaction(origin=ORIGIN)
            except RuntimeError:  # a reload from disk holds the document
                if time.monotonic() > deadline:
                    raise NotebookUnavailable(
                        f"the live document of {self.path} stayed busy"
                    ) from None
                await asyncio.sleep(RETRY_INTERVAL)
                continue
            with txn:
                return sum(_mark_branch(c, session_id, on, off) for c in doc.ycells)


def _mark_branch(ycell: Map, session_id: str, on: set[str], off: set[str]) -> bool:
    cell_id = ycell.get("id")
    if cell_id not in on and cell_id not in off:
        return False
    metadata = ycell.get("metadata")
    if not isinstance(metadata, Map):
        return False
    agent = metadata.get("prime_agent")
    plain = agent.to_py() if isinstance(agent, Map) else agent
    if not isinstance(plain, dict) or plain.get("session_id") != session_id:
        return False
    if not mark_cell({"prime_agent": plain}, cell_id in on):
        return False
    if isinstance(agent, Map):
        if cell_id in on:
            del agent["branch"]
        else:
            agent["branch"] = OTHER_BRANCH
    else:
        metadata["prime_agent"] = plain
    return True


def _try_insert(doc: Any, ycell: Map) -> bool:
    """Insert the agent's cell already marked running: one document update instead of two (each
    update is a write to the room's store)."""
    try:
        txn = doc.ydoc.transaction(origin=ORIGIN)
    except RuntimeError:  # a reload from disk holds its own transaction
        return False
    with txn:
        _insert_before_trailing_blank(doc, ycell)
        ycell["execution_state"] = "running"
    return True


def _insert_before_trailing_blank(doc: Any, ycell: Map) -> None:
    cells = doc.ycells
    index = len(cells)
    # A trailing empty cell is where the user types next: keep it last.
    if index and _is_blank_code_cell(cells[index - 1]):
        index -= 1
    cells.insert(index, ycell)


def _room_of(ext: Any, doc: Any) -> Any:
    rooms = getattr(getattr(ext, "ywebsocket_server", None), "rooms", None) or {}
    return next((r for r in rooms.values() if getattr(r, "_document", None) is doc), None)


def _reloading(room: Any) -> bool:
    """jupyter-collaboration changes a room's document from disk (initial load, out-of-band
    change, conflict on save) only while holding the room's update lock; edits from clients
    arrive without it."""
    lock = getattr(room, "_update_lock", None)
    return lock is not None and lock.locked()


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
            _insert_before_trailing_blank(self._doc, ycell)
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
