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
from pathlib import Path
from typing import Any

from ..core.ports import OutputEvent
from ..core.whole_writes import is_disk_full
from .nbjson import new_code_cell, new_notebook, read_notebook, write_notebook
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
        if self._file.exists():
            self.nb = read_notebook(self._file)
        else:
            self.nb = new_notebook(kernel_name, kernel_display_name, kernel_language)
            self._dirty = True
            self.flush()

    async def append_code_cell(self, source: str, metadata: dict[str, Any]) -> FileCellWriter:
        cell = new_code_cell(source, {"trusted": True, **metadata})
        self.nb["cells"].append(cell)
        self.changed()
        return FileCellWriter(self, cell, NotebookOutputCap(self._output_cap))

    async def save(self) -> None:
        self.changed()

    async def read_cell_outputs(self, cell_id: str) -> list[dict[str, Any]] | None:
        for cell in self.nb["cells"]:
            if cell.get("id") == cell_id:
                return [dict(output) for output in cell.get("outputs", [])]
        return None

    def changed(self) -> None:
        """Something changed: write now if the last write is `flush_interval` old, else then."""
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
        try:
            write_notebook(self.nb, self._file)
        except OSError as exc:  # still pending: the next change or flush() tries again
            self.write_error = exc
            return
        self._dirty = False
        self.write_error = None


class FileCellWriter:
    def __init__(
        self, notebook: FileNotebook, cell: dict[str, Any], cap: NotebookOutputCap
    ) -> None:
        self._notebook = notebook
        self._cell = cell
        self._cap = cap
        self._pending_clear = False
        self._display_index: dict[str, int] = {}
        self.cell_id: str = cell["id"]

    def set_running(self) -> None:
        self._cell["outputs"] = []
        self._cell["execution_count"] = None

    def apply(self, event: OutputEvent) -> None:
        self._apply(event)
        self._notebook.changed()

    def _apply(self, event: OutputEvent) -> None:
        outputs = self._cell["outputs"]
        if event.kind == "clear":
            if event.wait:
                self._pending_clear = True
            else:
                outputs.clear()
                self._display_index.clear()
            return
        if self._pending_clear:
            outputs.clear()
            self._display_index.clear()
            self._pending_clear = False
        output = event.output or {}
        if event.kind == "update_display":
            index = self._display_index.get(event.display_id or "")
            if index is not None:
                outputs[index] = dict(output)
            return
        if output.get("output_type") == "stream":
            text = self._cap.admit(output.get("text", ""))
            if not text:
                return
            last = outputs[-1] if outputs else None
            if (
                last is not None
                and last.get("output_type") == "stream"
                and last.get("name") == output.get("name")
            ):
                last["text"] += text
            else:
                outputs.append({"output_type": "stream", "name": output.get("name"), "text": text})
            return
        if event.display_id:
            self._display_index[event.display_id] = len(outputs)
        outputs.append(dict(output))

    def finish(self, execution_count: int | None) -> None:
        self._cell["execution_count"] = execution_count
        for output in self._cell["outputs"]:
            if output.get("output_type") == "execute_result":
                output["execution_count"] = execution_count
