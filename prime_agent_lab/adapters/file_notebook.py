"""The notebook port over an .ipynb file on disk, for headless runs (no live document)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import nbformat

from ..core.ports import OutputEvent
from .output_cap import NotebookOutputCap


class FileNotebook:
    def __init__(self, path: Path, output_cap: int, kernel_name: str = "python3") -> None:
        self.path = str(path)
        self._file = Path(path)
        self._output_cap = output_cap
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
        self.cell_id: str = cell["id"]

    def set_running(self) -> None:
        self._cell.outputs = []
        self._cell.execution_count = None

    def apply(self, event: OutputEvent) -> None:
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
        self._cell.execution_count = execution_count
        for output in self._cell.outputs:
            if output.get("output_type") == "execute_result":
                output["execution_count"] = execution_count
