"""The notebook port over the live shared document of jupyter-collaboration.

Every edit goes into the same Y document the open JupyterLab tabs render, so agent cells and their
outputs appear live; the room saves the file. Pitfalls this module respects (measured, see
docs/live-notebook.md): ask for the live document (`copy=False`), fetch it again per cell, append
stream text to the existing `Text` in place, clear output arrays in place, never rewrite the whole
notebook, mark agent cells trusted.
"""

from __future__ import annotations

import functools
import inspect
import logging
import uuid
from collections.abc import Callable
from typing import Any

from pycrdt import Array, Map, Text

from ..adapters.output_cap import NotebookOutputCap
from ..core.ports import OutputEvent

ORIGIN = "prime-agent"
log = logging.getLogger(__name__)


class NotebookUnavailable(RuntimeError):
    pass


class LiveNotebook:
    def __init__(self, ydoc_extension: Any, path: str, output_cap: int) -> None:
        self._ext = ydoc_extension
        self.path = path
        self._output_cap = output_cap
        self._supports_create = (
            "create" in inspect.signature(ydoc_extension.get_document).parameters
        )
        self._last_writer: LiveCellWriter | None = None

    async def document(self) -> Any:
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
        return doc

    async def append_code_cell(self, source: str, metadata: dict[str, Any]) -> LiveCellWriter:
        doc = await self.document()
        cell_id = uuid.uuid4().hex[:12]
        ycell = doc.create_ycell(
            {
                "id": cell_id,
                "cell_type": "code",
                "source": source,
                "metadata": {"trusted": True, **metadata},
                "outputs": [],
                "execution_count": None,
            }
        )
        _insert_before_trailing_blank(doc, ycell)
        writer = LiveCellWriter(doc, ycell, cell_id, NotebookOutputCap(self._output_cap))
        self._last_writer = writer
        return writer

    async def save(self) -> None:
        """The room saves by itself shortly after each change. This only repairs the one case it
        cannot see: every tab closed during a long cell, so the room was dropped and the rest of
        the cell's output went into a detached document. Copy that cell into the live one."""
        writer, self._last_writer = self._last_writer, None
        if writer is None or writer.detached:
            return
        doc = await self.document()
        if doc is writer.document:
            return
        finished = writer.snapshot()
        with doc.ydoc.transaction(origin=ORIGIN):
            for ycell in doc.ycells:
                if ycell.get("id") == writer.cell_id:
                    outputs: Array = ycell["outputs"]
                    del outputs[:]
                    outputs.extend([_youtput(o) for o in finished["outputs"]])
                    ycell["execution_count"] = finished["execution_count"]
                    ycell["execution_state"] = "idle"
                    return
        _insert_before_trailing_blank(doc, doc.create_ycell(finished))

    async def read_cell_outputs(self, cell_id: str) -> list[dict[str, Any]] | None:
        """The outputs the live document holds for a cell (found by id), or None."""
        doc = await self.document()
        for ycell in doc.ycells:
            if ycell.get("id") == cell_id:
                outputs = ycell.get("outputs")
                return [] if outputs is None else list(outputs.to_py())
        return None


def _insert_before_trailing_blank(doc: Any, ycell: Map) -> None:
    with doc.ydoc.transaction(origin=ORIGIN):
        cells = doc.ycells
        index = len(cells)
        # A trailing empty cell is where the user types next: keep it last.
        if index and _is_blank_code_cell(cells[index - 1]):
            index -= 1
        cells.insert(index, ycell)


def _youtput(output: dict[str, Any]) -> Map:
    if output.get("output_type") == "stream":
        return Map({**output, "text": Text(str(output.get("text", "")))})
    return Map(dict(output))


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


def _tolerate_deleted_cell(method: Callable[..., None]) -> Callable[..., None]:
    """The user may delete an agent cell while it runs: later writes are dropped, not fatal."""

    @functools.wraps(method)
    def guarded(self: LiveCellWriter, *args: Any) -> None:
        if self.detached:
            return
        try:
            method(self, *args)
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError):
            self.detached = True
            log.info("agent cell %s left the notebook; its further output is dropped", self.cell_id)

    return guarded


class LiveCellWriter:
    def __init__(self, doc: Any, ycell: Map, cell_id: str, cap: NotebookOutputCap) -> None:
        self._doc = doc
        self._ycell = ycell
        self._cap = cap
        self._pending_clear = False
        self._display_index: dict[str, int] = {}
        self.cell_id = cell_id
        self.detached = False

    @property
    def document(self) -> Any:
        return self._doc

    def snapshot(self) -> dict[str, Any]:
        """The cell as nbformat JSON, as this writer left it."""
        cell = self._ycell.to_py()
        cell.pop("execution_state", None)
        return cell

    def _transaction(self) -> Any:
        return self._doc.ydoc.transaction(origin=ORIGIN)

    @_tolerate_deleted_cell
    def set_running(self) -> None:
        with self._transaction():
            del self._ycell["outputs"][:]
            self._ycell["execution_count"] = None
            self._ycell["execution_state"] = "running"

    @_tolerate_deleted_cell
    def apply(self, event: OutputEvent) -> None:
        outputs: Array = self._ycell["outputs"]
        with self._transaction():
            if event.kind == "clear":
                if event.wait:
                    self._pending_clear = True
                else:
                    self._clear(outputs)
                return
            if self._pending_clear:
                self._clear(outputs)
                self._pending_clear = False
            output = event.output or {}
            if event.kind == "update_display":
                index = self._display_index.get(event.display_id or "")
                if index is not None and index < len(outputs):
                    outputs[index] = Map(dict(output))
                return
            if output.get("output_type") == "stream":
                self._append_stream(outputs, output)
                return
            if event.display_id:
                self._display_index[event.display_id] = len(outputs)
            outputs.append(Map(dict(output)))

    def _clear(self, outputs: Array) -> None:
        del outputs[:]
        self._display_index.clear()

    def _append_stream(self, outputs: Array, output: dict[str, Any]) -> None:
        text = self._cap.admit(str(output.get("text", "")))
        if not text:
            return
        name = output.get("name", "stdout")
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
                    shared += text
                    return
        outputs.append(Map({"output_type": "stream", "name": name, "text": Text(text)}))

    @_tolerate_deleted_cell
    def finish(self, execution_count: int | None) -> None:
        with self._transaction():
            outputs: Array = self._ycell["outputs"]
            for index in range(len(outputs)):
                item = outputs[index]
                if isinstance(item, Map) and item.get("output_type") == "execute_result":
                    item["execution_count"] = execution_count
            self._ycell["execution_count"] = execution_count
            self._ycell["execution_state"] = "idle"
