"""The notebook port over an .ipynb file on disk, for headless runs (no live document).

A running cell's output is written to disk at most `flush_interval` seconds after it arrives, so a
process killed mid-cell (SIGKILL, power loss) loses at most that much of it.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import nbformat

from ..core.ports import OutputEvent
from .output_cap import NotebookOutputCap

FLUSH_INTERVAL = 1.0


class FileNotebook:
    def __init__(
        self,
        path: Path,
        output_cap: int,
        kernel_name: str = "python3",
        flush_interval: float = FLUSH_INTERVAL,
    ) -> None:
        self.path = str(path)
        self._file = Path(path)
        self._output_cap = output_cap
        self.flush_interval = flush_interval
        if self._file.exists():
            self.nb = nbformat.read(self._file, as_version=4)
            if self.nb.nbformat_minor < 5:
                # Agent cells carry ids, which need format 4.5; give older cells ids too.
                self.nb.nbformat_minor = 5
                for cell in self.nb.cells:
                    cell.setdefault("id", uuid.uuid4().hex[:12])
        else:
            self.nb = nbformat.v4.new_notebook()
            self.nb.metadata["kernelspec"] = {
                "name": kernel_name,
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
            }
            self.nb.metadata["language_info"] = {"name": "python"}
            self._write()

    async def append_code_cell(self, source: str, metadata: dict[str, Any]) -> FileCellWriter:
        cell = nbformat.v4.new_code_cell(source=source, metadata={"trusted": True, **metadata})
        cell["id"] = uuid.uuid4().hex[:12]
        self.nb.cells.append(cell)
        self._write()
        return FileCellWriter(self, cell, NotebookOutputCap(self._output_cap))

    async def save(self) -> None:
        self._write()

    async def read_cell_outputs(self, cell_id: str) -> list[dict[str, Any]] | None:
        for cell in self.nb.cells:
            if cell.get("id") == cell_id:
                return [dict(output) for output in cell.get("outputs", [])]
        return None

    def _write(self) -> None:
        tmp = self._file.with_name(f".{self._file.name}.{os.getpid()}.tmp")
        nbformat.write(self.nb, tmp)
        os.replace(tmp, self._file)


class FileCellWriter:
    def __init__(self, notebook: FileNotebook, cell: Any, cap: NotebookOutputCap) -> None:
        self._notebook = notebook
        self._cell = cell
        self._cap = cap
        self._pending_clear = False
        self._display_index: dict[str, int] = {}
        self._written_at = time.monotonic()
        self._flush_timer: asyncio.TimerHandle | None = None
        self.cell_id: str = cell["id"]

    def _flush_soon(self) -> None:
        """Write new output now if the last write is a flush interval old, else once it is."""
        if self._flush_timer is not None:
            return
        wait = self._written_at + self._notebook.flush_interval - time.monotonic()
        if wait <= 0:
            self._flush()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): write now
            self._flush()
            return
        self._flush_timer = loop.call_later(wait, self._flush)

    def _flush(self) -> None:
        self._flush_timer = None
        self._written_at = time.monotonic()
        self._notebook._write()

    def _cancel_flush(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None

    def set_running(self) -> None:
        self._cell.outputs = []
        self._cell.execution_count = None

    def apply(self, event: OutputEvent) -> None:
        self._apply(event)
        self._flush_soon()

    def _apply(self, event: OutputEvent) -> None:
        outputs = self._cell.outputs
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
                outputs[index] = nbformat.from_dict(output)
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
                outputs.append(nbformat.v4.new_output("stream", name=output.get("name"), text=text))
            return
        if event.display_id:
            self._display_index[event.display_id] = len(outputs)
        outputs.append(nbformat.from_dict(output))

    def finish(self, execution_count: int | None) -> None:
        self._cancel_flush()  # the loop saves the notebook right after
        self._cell.execution_count = execution_count
        for output in self._cell.outputs:
            if output.get("output_type") == "execute_result":
                output["execution_count"] = execution_count
