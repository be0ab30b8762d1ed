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
import contextlib
import inspect
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from jupyter_server_ydoc.utils import encode_file_path
from pycrdt import Map

from ..adapters.output_cap import NotebookOutputCap
from ..core.branching import OTHER_BRANCH, mark_cell
from ..core.ports import NotebookUnavailable
from .live_cell import (
    BUSY_LIMIT,
    ORIGIN,
    RETRY_INTERVAL,
    LiveCellWriter,
    Notice,
    insert_before_trailing_blank,
)

__all__ = ["ORIGIN", "LiveCellWriter", "LiveNotebook", "NotebookUnavailable"]

# A file rewritten during the last moments of a turn is noticed by the room's file watcher (1 s
# polling by default) after the turn ended: its cells stay protected a little longer.
RELOAD_GRACE = 5.0

log = logging.getLogger(__name__)


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

    def viewed(self) -> bool:
        """A browser tab has the notebook's document open: a client in its room. Joining the
        room comes before the tab's kernel websocket, so this holds the agent (no eviction)
        while a tab is still connecting to its kernel."""
        if self._file_id is None:
            return False
        room = _rooms(self._ext).get(encode_file_path("json", "notebook", self._file_id))
        return bool(getattr(room, "clients", None))

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

    async def append_markdown_cell(self, source: str, metadata: dict[str, Any]) -> str:
        """A narration cell (`narrate_cells`): written once, with no writer to bring it back
        after a reload (a reload keeps what the document saved; the cell is text only)."""
        doc = await self.document()
        cell_id = uuid.uuid4().hex[:12]
        cell = {"id": cell_id, "cell_type": "markdown", "source": source, "metadata": metadata}
        ycell = doc.create_ycell(cell)
        async with self._transaction(doc):
            insert_before_trailing_blank(doc, ycell)
        return cell_id

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
        insert_before_trailing_blank(doc, ycell)

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

    async def remove_cells(self, cell_ids: list[str]) -> list[str]:
        """Delete the cells with these ids from the live document (reverting a turn: the cells
        a REST client did not remove and a panel's deletes not synced yet; the panel deletes
        through its own notebook model so undo works). Returns the ids that were there, in the
        order given. Which cells may go is the caller's check (jupyter/host_review.py)."""
        doc = await self.document()
        wanted = set(cell_ids)
        found: set[str] = set()
        async with self._transaction(doc):
            cells = doc.ycells
            for index in reversed(range(len(cells))):
                cell_id = cells[index].get("id")
                if cell_id in wanted:
                    found.add(cell_id)
                    del cells[index]
        for writer in self._writers:  # a reload must not write a removed cell back
            if writer.cell_id in found:
                writer.detached = True
        return [i for i in cell_ids if i in found]

    async def mark_branches(self, session_id: str, on: set[str], off: set[str]) -> int:
        """Mark this session's agent cells written off the current branch, unmark those on it
        (docs/branching.md). Returns how many cells changed."""
        doc = await self.document()
        async with self._transaction(doc):
            return sum(_mark_branch(c, session_id, on, off) for c in doc.ycells)

    @contextlib.asynccontextmanager
    async def _transaction(self, doc: Any) -> AsyncIterator[None]:
        """One transaction of ours on the live document, waiting while a reload from disk holds
        it (up to BUSY_LIMIT)."""
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
                yield
            return


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
        insert_before_trailing_blank(doc, ycell)
        ycell["execution_state"] = "running"
    return True


def _rooms(ext: Any) -> dict[str, Any]:
    """jupyter-collaboration's open rooms by room id (`json:notebook:<file id>`)."""
    return getattr(getattr(ext, "ywebsocket_server", None), "rooms", None) or {}


def _room_of(ext: Any, doc: Any) -> Any:
    rooms = _rooms(ext)
    return next((r for r in rooms.values() if getattr(r, "_document", None) is doc), None)


def _reloading(room: Any) -> bool:
    """jupyter-collaboration changes a room's document from disk (initial load, out-of-band
    change, conflict on save) only while holding the room's update lock; edits from clients
    arrive without it."""
    lock = getattr(room, "_update_lock", None)
    return lock is not None and lock.locked()
