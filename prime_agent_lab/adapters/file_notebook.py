"""The notebook port over an .ipynb file on disk, for headless runs (no live document).

Writes are batched: the file is rewritten at most once per `flush_interval` (and at once when
that long has passed since the last write), and on `flush()` when the run ends. So a fast loop of
small cells does not re-serialise the whole notebook per cell, and a process killed mid-cell
(SIGKILL, power loss) loses at most the last `flush_interval` seconds of output.

A write that fails (a full disk) leaves the previous file as it was and never raises into the
cell that is running: the notebook stays pending and is written again with the next change;
`flush()` at the end of the run raises `NotebookNotSaved` if it still cannot be written.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.blank_cell import is_blank_code_cell
from ..core.output_fold import OutputFold
from ..core.ports import OutputEvent
from ..core.whole_writes import is_disk_full
from .nbjson import new_code_cell, new_markdown_cell, new_notebook, read_notebook, write_notebook
from .output_cap import NotebookOutputCap

FLUSH_INTERVAL = 1.0


class NotebookNotSaved(Exception):
    """The notebook file could not be written; its previous version is still on disk."""

    def __init__(self, path: str, cause: OSError) -> None:
        what = "the disk is full" if is_disk_full(cause) else "it could not be written"
        kept = "its last saved version is kept" if Path(path).exists() else "it was not created"
        super().__init__(
            f"the notebook {path} could not be saved ({what}: {cause.strerror or cause}); {kept}"
        )
        self.cause = cause


class FileNotebook:
    def __init__(
        self,
        path: Path,
        output_cap: int,
        kernel_name: str = "python3",
        flush_interval: float = FLUSH_INTERVAL,
        kernel_display_name: str = "Python 3 (ipykernel)",
        kernel_language: str = "python",
    ) -> None:
        self.path = str(path)
        self._file = Path(path)
        self._output_cap = output_cap
        self.flush_interval = flush_interval
        self._written_at = float("-inf")
        self._timer: asyncio.TimerHandle | None = None
        self._dirty = False
        self.write_error: OSError | None = None  # why the last write failed (None: it did not)
        self._stale: set[FileCellWriter] = set()
        if self._file.exists():
            self.nb = read_notebook(self._file)
        else:
            self.nb = new_notebook(kernel_name, kernel_display_name, kernel_language)
            self._dirty = True
            self.flush()

    async def append_code_cell(self, source: str, metadata: dict[str, Any]) -> FileCellWriter:
        cell = new_code_cell(source, {"trusted": True, **metadata})
        self._insert(cell)
        return FileCellWriter(self, cell, NotebookOutputCap(self._output_cap))

    async def append_markdown_cell(self, source: str, metadata: dict[str, Any]) -> str:
        cell = new_markdown_cell(source, metadata)
        self._insert(cell)
        return str(cell["id"])

    def _insert(self, cell: Any) -> None:
        """Append `cell`, above a trailing empty cell: that is where the user types next, so it
        stays last (as live_cell.py keeps it)."""
        cells = self.nb["cells"]
        at = len(cells) - 1 if cells and is_blank_code_cell(cells[-1]) else len(cells)
        cells.insert(at, cell)
        self.changed()

    async def save(self) -> None:
        self.changed()

    async def read_cell_outputs(self, cell_id: str) -> list[dict[str, Any]] | None:
        self._sync_cells()
        for cell in self.nb["cells"]:
            if cell.get("id") == cell_id:
                return [dict(output) for output in cell.get("outputs", [])]
        return None

    def stale(self, writer: FileCellWriter) -> None:
        """`writer`'s cell holds older outputs than the writer: copy them before writing."""
        self._stale.add(writer)

    def changed(self, writer: FileCellWriter | None = None) -> None:
        """Something changed: write now if the last write is `flush_interval` old, else then."""
        if writer is not None:
            self._stale.add(writer)
        self._dirty = True
        if self._timer is not None:
            return
        wait = self._written_at + self.flush_interval - time.monotonic()
        if wait <= 0:
            self._write()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): write now
            self._write()
            return
        self._timer = loop.call_later(wait, self._write)

    def flush(self) -> None:
        """Write what is pending now (the run ends); NotebookNotSaved if that fails."""
        if self._dirty:
            self._write()
        if self.write_error is not None:
            raise NotebookNotSaved(self.path, self.write_error)

    def _write(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._written_at = time.monotonic()
        self._sync_cells()
        try:
            write_notebook(self.nb, self._file)
        except OSError as exc:  # still pending: the next change or flush() tries again
            self.write_error = exc
            return
        self._dirty = False
        self.write_error = None

    def _sync_cells(self) -> None:
        for writer in self._stale:
            writer.sync()
        self._stale.clear()


class FileCellWriter:
    """One agent cell of the file: its outputs are folded (core/output_fold.py) and copied into
    the notebook when it is written, not per event (a chatty cell would cost quadratic time)."""

    def __init__(
        self, notebook: FileNotebook, cell: dict[str, Any], cap: NotebookOutputCap
    ) -> None:
        self._notebook = notebook
        self._cell = cell
        self._fold = OutputFold(admit_stream=cap.admit)
        self.cell_id: str = cell["id"]

    def set_running(self) -> None:
        self._fold.reset()
        self._cell["outputs"] = []
        self._cell["execution_count"] = None

    def apply(self, event: OutputEvent) -> None:
        if self._fold.apply(event):
            self._notebook.changed(self)

    def finish(self, execution_count: int | None) -> None:
        self._fold.finish(execution_count)
        self._cell["execution_count"] = execution_count
        self._notebook.stale(self)

    def sync(self) -> None:
        """Copy the folded outputs into the notebook's cell."""
        self._cell["outputs"] = self._fold.outputs()


class FileNotebooks:
    """The notebooks of a headless run: files under `cwd`, made by `make`, each kept (and written
    at the end of the run, `flush`) once opened. Nothing attaches to them while the run goes."""

    def __init__(self, cwd: Path, make: Callable[[Path], FileNotebook]) -> None:
        self._cwd = cwd
        self._make = make
        self.opened: list[FileNotebook] = []

    async def create(self, path: str, cells: list[dict[str, Any]]) -> FileNotebook:
        file = self._cwd / path
        if file.exists():
            raise FileExistsError(path)
        file.parent.mkdir(parents=True, exist_ok=True)
        notebook = self._make(file)
        notebook.nb["cells"].extend(cells)
        notebook.changed()
        notebook.flush()
        self.opened.append(notebook)
        return notebook

    async def open(self, path: str) -> FileNotebook:
        notebook = self._make(self._cwd / path)
        self.opened.append(notebook)
        return notebook

    def has_client(self, session_id: str, kernel_id: str) -> bool:
        return False

    def flush(self) -> list[NotebookNotSaved]:
        """Write every opened notebook; what could not be saved (the others are saved)."""
        unsaved = []
        for notebook in self.opened:
            try:
                notebook.flush()
            except NotebookNotSaved as exc:
                unsaved.append(exc)
        return unsaved
